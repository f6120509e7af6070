package main

import (
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// leasesMain is `peers leases`: many leases held and renewing on one
// node, from several client processes, and the same number side by side
// with etcd's lease keep-alive.
//
// The hold run: a `leasehold serve` node (fsync'd log), -procs processes
// of `leasehold bench --workload renew`, each holding -leases/-procs
// leases of -ttl renewed at ttl/3 (each renewal committed, as always) for
// -duration after they are all taken. Every second the node's RSS, CPU
// and leases held are sampled (the RSS curve: leases-rss.csv). Then the
// node is killed (SIGKILL) holding them all and started again on the same
// data: the restart time is until /readyz answers and until the node
// reports every lease held again (snapshot restored and log replayed).
//
// The side-by-side runs (-side N, 0 to skip): N leases of -side-ttl
// renewed at ttl/3 from -procs clients, alternating leasehold (the same
// bench processes) and etcd (-procs clientv3 clients, one per process as
// they would be, each granting its share of leases with a key attached
// and keeping them alive on its one LeaseKeepAlive stream, as clientv3's
// KeepAlive does; the latency of each keep-alive is timed from its
// request to its answer), -side-rounds rounds each.
func leasesMain(args []string) {
	fs := flag.NewFlagSet("leases", flag.ExitOnError)
	lhBin := fs.String("leasehold", "leasehold", "leasehold binary")
	etcdBin := fs.String("etcd", "etcd", "etcd server binary")
	out := fs.String("out", ".", "directory for leases.md, leases.json and leases-rss.csv")
	work := fs.String("work-dir", "", "directory for the nodes' data and logs (default: a new temp dir, removed at the end)")
	leases := fs.Int("leases", 1_000_000, "leases held in the hold run (0: skip it)")
	procs := fs.Int("procs", 16, "client processes (etcd: clients) that hold them")
	workers := fs.Int("clients", 32, "renewal workers in each bench process")
	ttl := fs.Duration("ttl", 5*time.Minute, "the hold run's lease TTL (renewed at TTL/3)")
	duration := fs.Duration("duration", 15*time.Minute, "how long the hold run renews after its leases are all taken")
	restart := fs.Bool("restart", true, "after the hold run, kill the node holding every lease and time its restart")
	side := fs.Int("side", 100_000, "leases of each side-by-side run with etcd (0: skip them)")
	sideTTL := fs.Duration("side-ttl", 30*time.Second, "the side-by-side runs' lease TTL")
	sideDuration := fs.Duration("side-duration", 2*time.Minute, "how long each side-by-side run renews")
	sideRounds := fs.Int("side-rounds", 2, "side-by-side rounds of each (alternating)")
	sideTargets := fs.String("side-targets", "leasehold,etcd", "the side-by-side runs' targets, in the first round's order")
	fs.Parse(args)
	must(os.MkdirAll(*out, 0o755))
	dir := *work
	if dir == "" {
		d, err := os.MkdirTemp("", "peers-leases-")
		must(err)
		defer os.RemoveAll(d)
		dir = d
	}
	var rep leasesReport
	rep.Started = time.Now()
	save := func() {
		js, _ := json.MarshalIndent(rep, "", "  ")
		must(os.WriteFile(filepath.Join(*out, "leases.json"), js, 0o644))
		md := leasesMarkdown(rep)
		must(os.WriteFile(filepath.Join(*out, "leases.md"), []byte(md), 0o644))
	}
	if *leases > 0 {
		h, curve, err := holdLeasehold(*lhBin, filepath.Join(dir, "hold"), *leases, *procs, *workers, *ttl, *duration, *restart)
		if err != nil {
			log.Fatal(err)
		}
		rep.Hold = &h
		var csv strings.Builder
		csv.WriteString("seconds,rss_bytes,leases_held,node_cpu_s\n")
		for _, s := range curve {
			fmt.Fprintf(&csv, "%.0f,%d,%d,%.2f\n", s.At.Seconds(), s.RSS, s.Held, s.CPU.Seconds())
		}
		must(os.WriteFile(filepath.Join(*out, "leases-rss.csv"), []byte(csv.String()), 0o644))
		save()
	}
	for round := range *sideRounds {
		if *side == 0 {
			break
		}
		order := strings.Split(*sideTargets, ",")
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, t := range order {
			d := filepath.Join(dir, fmt.Sprintf("side%d-%s", round, t))
			var h holdResult
			var err error
			if t == "leasehold" {
				h, _, err = holdLeasehold(*lhBin, d, *side, *procs, *workers, *sideTTL, *sideDuration, false)
			} else {
				h, err = holdEtcd(*etcdBin, d, *side, *procs, *sideTTL, *sideDuration)
			}
			if err != nil {
				log.Fatal(err)
			}
			rep.Side = append(rep.Side, h)
			save()
		}
	}
	save()
	fmt.Print(leasesMarkdown(rep))
}

type leasesReport struct {
	Started time.Time    `json:"started"`
	Hold    *holdResult  `json:"hold,omitempty"`
	Side    []holdResult `json:"side,omitempty"`
}

// holdResult is one run of N leases held and renewing.
type holdResult struct {
	Target   string        `json:"target"`
	Leases   int           `json:"leases"`
	Procs    int           `json:"procs"`
	TTL      time.Duration `json:"ttl"`
	Duration time.Duration `json:"duration"` // renewing, after the setup
	Load     string        `json:"load"`     // /proc/loadavg at the start and the end
	Granted  int64         `json:"granted"`
	Lost     int64         `json:"lost"`
	Setup    time.Duration `json:"setup"` // until every lease was held
	// Renewals per second over the steady part, and what TTL/3 needs.
	RenewPerS    float64 `json:"renew_per_s"`
	RequiredPerS float64 `json:"required_per_s"`
	// Renewal (keep-alive) latency; leasehold: the least and the largest
	// of the processes' own percentiles, and their largest max.
	P50, P99, P999, Max   time.Duration
	P99Low, P50Low        time.Duration
	EmptyRSS, HeldRSSLast int64
	HeldRSSPeak, PeakRSS  int64
	// RSS per lease above the empty node, in bytes, while all are held:
	// the last sample and the largest.
	PerLeaseLast, PerLeasePeak float64
	// The longest read of the node's /metrics (held leases) while they
	// were held.
	SlowestScrape time.Duration
	// CPU of the node, and of the clients, over the steady part, as a
	// share of one core.
	NodeCPUShare, ClientCPUShare float64
	// The restart holding them all (hold run only).
	RestartReady, RestartAllHeld time.Duration
	RestartHeld                  int64
	Errors                       string `json:"errors,omitempty"`
}

type rssSample struct {
	At   time.Duration
	RSS  int64
	Held int64
	CPU  time.Duration
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func rssOf(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// gauge reads one unlabelled metric of a node's /metrics (-1 if unread).
func gauge(url, name string) int64 {
	resp, err := metricsClient.Get(url + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int64(f)
		}
	}
	return -1
}

// sampler reads pid's RSS and CPU every second, and held() every
// heldEvery, until stop. held reads the node's /metrics, and a scrape
// walks every lease (leasehold_elections) while Apply waits: as often as
// a Prometheus would scrape, not every second. The longest scrape is kept.
type sampler struct {
	mu      sync.Mutex
	samples []rssSample
	slowest time.Duration
	stop    chan struct{}
	done    chan struct{}
}

const heldEvery = 15 * time.Second

func startSampler(pid func() int, held func() int64) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(s.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var last int64
		var read time.Time
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				p := pid()
				if time.Since(read) >= heldEvery {
					t0 := time.Now()
					last, read = held(), t0
					s.slowest = max(s.slowest, time.Since(t0))
				}
				x := rssSample{At: time.Since(start), RSS: rssOf(p), Held: last, CPU: procCPU(p)}
				s.mu.Lock()
				s.samples = append(s.samples, x)
				s.mu.Unlock()
			}
		}
	}()
	return s
}

func (s *sampler) end() []rssSample {
	close(s.stop)
	<-s.done
	return s.samples
}

// steady fills h's RSS and CPU figures from the samples taken while all n
// leases were held.
func steady(h *holdResult, samples []rssSample, n int64, clientCPU time.Duration) {
	var first, last *rssSample
	for i := range samples {
		s := &samples[i]
		h.PeakRSS = max(h.PeakRSS, s.RSS)
		if s.Held >= n {
			if first == nil {
				first = s
			}
			last = s
			h.HeldRSSPeak = max(h.HeldRSSPeak, s.RSS)
		}
	}
	if last == nil {
		return
	}
	h.HeldRSSLast = last.RSS
	h.PerLeaseLast = float64(last.RSS-h.EmptyRSS) / float64(n)
	h.PerLeasePeak = float64(h.HeldRSSPeak-h.EmptyRSS) / float64(n)
	if span := last.At - first.At; span > 0 {
		h.NodeCPUShare = float64(last.CPU-first.CPU) / float64(span)
		h.ClientCPUShare = float64(clientCPU) / float64(span)
	}
}

// benchReport is what holdLeasehold reads of `bench -o json`.
type benchReport struct {
	MeasuredS  float64 `json:"measured_s"`
	Throughput struct {
		PerSecond float64 `json:"per_second"`
	} `json:"throughput"`
	Ops []struct {
		Name   string  `json:"name"`
		P50Ms  float64 `json:"p50_ms"`
		P99Ms  float64 `json:"p99_ms"`
		P999Ms float64 `json:"p999_ms"`
		MaxMs  float64 `json:"max_ms"`
	} `json:"ops"`
	Errors map[string]int64 `json:"errors"`
	Renew  struct {
		Granted      int64   `json:"granted"`
		Lost         int64   `json:"lost"`
		SetupS       float64 `json:"setup_s"`
		RequiredRate float64 `json:"required_per_second"`
	} `json:"renew"`
}

func msDur(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

func holdLeasehold(bin, dir string, n, procs, workers int, ttl, duration time.Duration, restart bool) (holdResult, []rssSample, error) {
	h := holdResult{Target: "leasehold", Leases: n, Procs: procs, TTL: ttl, Duration: duration, Load: loadavg()}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return h, nil, err
	}
	lh, err := startLeasehold(bin, dir, 1)
	if err != nil {
		return h, nil, err
	}
	defer lh.stop()
	url := lh.endpoints[0]
	time.Sleep(2 * time.Second) // let the empty node settle
	pid := func() int { return lh.procs[0].Process.Pid }
	h.EmptyRSS = rssOf(pid())
	smp := startSampler(pid, func() int64 { return gauge(url, "leasehold_leases_held") })
	fmt.Fprintf(os.Stderr, "leasehold: %d leases from %d processes, TTL %v, renewing for %v after the setup (load %s)\n", n, procs, ttl, duration, h.Load)
	t0 := time.Now()
	type proc struct {
		cmd *exec.Cmd
		out bytes.Buffer
	}
	ps := make([]*proc, procs)
	for i := range ps {
		share := n / procs
		if i < n%procs {
			share++
		}
		p := &proc{}
		p.cmd = exec.Command(bin, "bench", "--endpoints", url, "--workload", "renew", "--leases", strconv.Itoa(share),
			"--prefix", fmt.Sprintf("bench/p%d", i), "--ttl", ttl.String(), "--clients", strconv.Itoa(workers),
			"--duration", duration.String(), "--leave-held", "-o", "json")
		p.cmd.Stdout = &p.out
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("bench%d.log", i)))
		if err != nil {
			return h, nil, err
		}
		p.cmd.Stderr = logf
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := p.cmd.Start(); err != nil {
			return h, nil, err
		}
		logf.Close()
		ps[i] = p
	}
	var clientCPU time.Duration
	var errs []string
	var sumRate, sumNeed float64
	for i, p := range ps {
		if err := p.cmd.Wait(); err != nil {
			errs = append(errs, fmt.Sprintf("bench %d: %v", i, err))
			continue
		}
		clientCPU += p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
		var r benchReport
		if err := json.Unmarshal(p.out.Bytes(), &r); err != nil {
			errs = append(errs, fmt.Sprintf("bench %d: %v", i, err))
			continue
		}
		h.Granted += r.Renew.Granted
		h.Lost += r.Renew.Lost
		h.Setup = max(h.Setup, msDur(r.Renew.SetupS*1000))
		sumRate += r.Throughput.PerSecond
		sumNeed += r.Renew.RequiredRate
		for _, o := range r.Ops {
			if o.Name != "renew" {
				continue
			}
			if h.P99 == 0 {
				h.P50Low, h.P99Low = msDur(o.P50Ms), msDur(o.P99Ms)
			}
			h.P50, h.P99 = max(h.P50, msDur(o.P50Ms)), max(h.P99, msDur(o.P99Ms))
			h.P50Low, h.P99Low = min(h.P50Low, msDur(o.P50Ms)), min(h.P99Low, msDur(o.P99Ms))
			h.P999, h.Max = max(h.P999, msDur(o.P999Ms)), max(h.Max, msDur(o.MaxMs))
		}
		for code, c := range r.Errors {
			errs = append(errs, fmt.Sprintf("bench %d: %d %s", i, c, code))
		}
	}
	h.RenewPerS, h.RequiredPerS = sumRate, sumNeed
	_ = t0
	samples := smp.end()
	h.SlowestScrape = smp.slowest
	steady(&h, samples, int64(n), clientCPU)
	// The clients' CPU was over their whole run; the share is over the
	// steady part: count it over the run instead.
	if len(samples) > 0 {
		h.ClientCPUShare = float64(clientCPU) / float64(time.Since(t0))
	}
	h.Load += " → " + loadavg()
	h.Errors = strings.Join(errs, "; ")
	fmt.Fprintf(os.Stderr, "leasehold: %d granted, %d lost, %.0f renewals/s of %.0f needed, renew p99 %v–%v, RSS/lease %.0f B (last) %.0f B (peak), node CPU %.0f%% of a core\n",
		h.Granted, h.Lost, h.RenewPerS, h.RequiredPerS, h.P99Low, h.P99, h.PerLeaseLast, h.PerLeasePeak, 100*h.NodeCPUShare)
	if restart && h.Granted > 0 {
		if err := timeRestart(lh, &h); err != nil {
			return h, samples, err
		}
		fmt.Fprintf(os.Stderr, "leasehold: restarted holding %d leases: ready after %v, all held after %v\n", h.RestartHeld, h.RestartReady, h.RestartAllHeld)
	}
	return h, samples, nil
}

// timeRestart kills the node (SIGKILL, no clean shutdown) and starts it
// again on its data, timing until /readyz answers 200 and until its
// leases_held gauge is back to what the clients were granted.
func timeRestart(lh *servers, h *holdResult) error {
	old := lh.procs[0]
	old.Process.Kill()
	old.Wait()
	t0 := time.Now()
	cmd := exec.Command(old.Path, old.Args[1:]...)
	cmd.Stdout, cmd.Stderr = old.Stdout, old.Stderr
	if f, ok := old.Stdout.(*os.File); ok {
		cmd.Stdout, cmd.Stderr = f, f
	}
	logf, err := os.OpenFile(filepath.Join(filepath.Dir(argAfter(old.Args, "--data-dir")), "n1.log"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err == nil {
		cmd.Stdout, cmd.Stderr = logf, logf
		defer logf.Close()
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	lh.procs[0] = cmd
	url := lh.endpoints[0]
	deadline := t0.Add(5 * time.Minute)
	for h.RestartReady == 0 && time.Now().Before(deadline) {
		if resp, err := http.Get(url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				h.RestartReady = time.Since(t0)
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	for time.Now().Before(deadline) {
		if h.RestartHeld = gauge(url, "leasehold_leases_held"); h.RestartHeld >= h.Granted-h.Lost {
			h.RestartAllHeld = time.Since(t0)
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("the restarted node holds %d leases after 5 minutes, want %d", h.RestartHeld, h.Granted-h.Lost)
}

func argAfter(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// holdEtcd holds n etcd leases of ttl, each with a key attached, from
// procs clients, keeping each alive at ttl/3 on its client's one
// LeaseKeepAlive stream for duration after the setup.
func holdEtcd(bin, dir string, n, procs int, ttl, duration time.Duration) (holdResult, error) {
	h := holdResult{Target: "etcd", Leases: n, Procs: procs, TTL: ttl, Duration: duration, Load: loadavg()}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return h, err
	}
	e, err := startEtcd(bin, dir, 1)
	if err != nil {
		return h, err
	}
	defer e.stop()
	time.Sleep(2 * time.Second)
	pid := func() int { return e.procs[0].Process.Pid }
	h.EmptyRSS = rssOf(pid())
	var held atomic.Int64
	smp := startSampler(pid, held.Load)
	fmt.Fprintf(os.Stderr, "etcd: %d leases with a key each from %d clients, TTL %v, kept alive for %v after the setup (load %s)\n", n, procs, ttl, duration, h.Load)
	c0 := selfCPU()
	t0 := time.Now()
	period := ttl / 3
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type group struct {
		cli   *clientv3.Client
		ids   []clientv3.LeaseID
		lat   []time.Duration
		lost  map[clientv3.LeaseID]bool // leases a keep-alive found expired
		qmu   sync.Mutex
		q     *list.List // of due: what to keep alive next, earliest first
		sent  int64
		errMu sync.Mutex
		err   error
	}
	type due struct {
		id clientv3.LeaseID
		at time.Time
	}
	var end atomic.Int64 // when the keep-alives stop (unix ns); set after the setup
	end.Store(math.MaxInt64)
	var measuring atomic.Bool // latencies count after the setup
	var wg sync.WaitGroup
	gs := make([]*group, procs)
	var setup sync.WaitGroup
	for i := range gs {
		cli, err := clientv3.New(clientv3.Config{Endpoints: e.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return h, err
		}
		defer cli.Close()
		g := &group{cli: cli, lost: map[clientv3.LeaseID]bool{}, q: list.New()}
		gs[i] = g
		share := n / procs
		if i < n%procs {
			share++
		}
		g.ids = make([]clientv3.LeaseID, share)
		// Take the leases with 8 callers a client.
		var next atomic.Int64
		for range 8 {
			setup.Go(func() {
				for {
					j := int(next.Add(1) - 1)
					if j >= share {
						return
					}
					for try := 0; ; try++ {
						gr, err := cli.Grant(ctx, int64(ttl/time.Second))
						if err == nil {
							if _, err = cli.Put(ctx, fmt.Sprintf("/peers-leases/%d/%d", i, j), "", clientv3.WithLease(gr.ID)); err == nil {
								g.ids[j] = gr.ID
								held.Add(1)
								// Kept alive from its grant on, as
								// clientv3's KeepAlive would.
								g.qmu.Lock()
								g.q.PushBack(due{gr.ID, time.Now().Add(period)})
								g.qmu.Unlock()
								break
							}
						}
						if try > 100 {
							g.errMu.Lock()
							g.err = err
							g.errMu.Unlock()
							return
						}
						time.Sleep(50 * time.Millisecond)
					}
				}
			})
		}
	}
	// Keep them alive: per client one stream, each lease from its grant on
	// (the setup outlasts a 30 s TTL); a lease is due period after its
	// grant or its last keep-alive.
	for _, g := range gs {
		stream, err := pb.NewLeaseClient(g.cli.ActiveConnection()).LeaseKeepAlive(ctx)
		if err != nil {
			return h, err
		}
		q := g.q
		var mu sync.Mutex
		sentAt := map[clientv3.LeaseID]time.Time{}
		wg.Go(func() { // receive
			for {
				r, err := stream.Recv()
				if err != nil {
					return
				}
				now := time.Now()
				mu.Lock()
				if t, ok := sentAt[clientv3.LeaseID(r.ID)]; ok {
					delete(sentAt, clientv3.LeaseID(r.ID))
					if measuring.Load() && now.UnixNano() < end.Load() {
						g.lat = append(g.lat, now.Sub(t))
					}
				}
				if r.TTL <= 0 {
					g.lost[clientv3.LeaseID(r.ID)] = true
				}
				mu.Unlock()
			}
		})
		wg.Go(func() { // send what is due, earliest first
			t := time.NewTicker(5 * time.Millisecond)
			defer t.Stop()
			for now := range t.C {
				if now.UnixNano() > end.Load() {
					stream.CloseSend()
					return
				}
				g.qmu.Lock()
				for q.Len() > 0 {
					f := q.Front()
					d := f.Value.(due)
					if d.at.After(now) {
						break
					}
					q.Remove(f)
					mu.Lock()
					gone := g.lost[d.id]
					sentAt[d.id] = now
					mu.Unlock()
					if gone {
						continue // as clientv3 does: an expired lease is kept alive no more
					}
					if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(d.id)}); err != nil {
						g.qmu.Unlock()
						return
					}
					g.sent++
					q.PushBack(due{d.id, now.Add(period)})
				}
				g.qmu.Unlock()
			}
		})
	}
	setup.Wait()
	h.Setup = time.Since(t0)
	h.Granted = held.Load()
	for _, g := range gs {
		if g.err != nil {
			return h, fmt.Errorf("etcd setup: %w", g.err)
		}
	}
	measuring.Store(true)
	end.Store(time.Now().Add(duration).UnixNano())
	wg.Wait()
	cancel()
	samples := smp.end()
	var lat []time.Duration
	for _, g := range gs {
		lat = append(lat, g.lat...)
		h.Lost += int64(len(g.lost))
	}
	slices.Sort(lat)
	h.P50, h.P99, h.P999 = quantile(lat, 0.5), quantile(lat, 0.99), quantile(lat, 0.999)
	h.P50Low, h.P99Low = h.P50, h.P99
	if len(lat) > 0 {
		h.Max = lat[len(lat)-1]
	}
	h.RenewPerS = float64(len(lat)) / duration.Seconds()
	h.RequiredPerS = float64(n) / period.Seconds()
	steady(&h, samples, int64(n), selfCPU()-c0)
	h.ClientCPUShare = float64(selfCPU()-c0) / float64(time.Since(t0))
	h.Load += " → " + loadavg()
	fmt.Fprintf(os.Stderr, "etcd: %d granted, %d lost, %.0f keep-alives/s of %.0f needed, p99 %v, RSS/lease %.0f B (last) %.0f B (peak), node CPU %.0f%% of a core\n",
		h.Granted, h.Lost, h.RenewPerS, h.RequiredPerS, h.P99, h.PerLeaseLast, h.PerLeasePeak, 100*h.NodeCPUShare)
	return h, nil
}

func leasesMarkdown(r leasesReport) string {
	var b strings.Builder
	kib := func(x float64) string { return fmt.Sprintf("%.2f KiB", x/1024) }
	mib := func(x int64) string { return fmt.Sprintf("%.0f MiB", float64(x)/(1<<20)) }
	if h := r.Hold; h != nil {
		fmt.Fprintf(&b, "Hold run: %d leases from %d processes, TTL %v renewed at TTL/3, %v after the setup (load %s).\n\n", h.Leases, h.Procs, h.TTL, h.Duration, h.Load)
		b.WriteString("| granted | lost | setup | renewals/s (needed) | renew p50 / p99 / p99.9 / max | node RSS empty → all held (last / peak) | RSS per lease above empty (last / peak) | node CPU | restart: ready / all held again |\n|---|---|---|---|---|---|---|---|---|\n")
		fmt.Fprintf(&b, "| %d | %d | %v | %.0f (%.0f) | %s / %s / %s / %s | %s → %s / %s | %s / %s | %.0f%% of a core | %v / %v |\n",
			h.Granted, h.Lost, h.Setup.Round(time.Second), h.RenewPerS, h.RequiredPerS, rng(h.P50Low, h.P50), rng(h.P99Low, h.P99), ms(h.P999), ms(h.Max),
			mib(h.EmptyRSS), mib(h.HeldRSSLast), mib(h.HeldRSSPeak), kib(h.PerLeaseLast), kib(h.PerLeasePeak), 100*h.NodeCPUShare,
			h.RestartReady.Round(10*time.Millisecond), h.RestartAllHeld.Round(10*time.Millisecond))
		fmt.Fprintf(&b, "\nThe slowest read of the node's /metrics while they were held took %v (read every %v).\n", h.SlowestScrape.Round(time.Millisecond), heldEvery)
		if h.Errors != "" {
			fmt.Fprintf(&b, "\nErrors: %s\n", h.Errors)
		}
	}
	if len(r.Side) > 0 {
		h := r.Side[0]
		fmt.Fprintf(&b, "\nSide by side: %d leases from %d clients, TTL %v renewed (kept alive) at TTL/3, %v each after the setup, alternating.\n\n", h.Leases, h.Procs, h.TTL, h.Duration)
		b.WriteString("| target | load | lost | setup | renewals/s (needed) | renew p50 / p99 / p99.9 / max | RSS per lease above empty (last / peak) | node CPU | client CPU |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, h := range r.Side {
			fmt.Fprintf(&b, "| %s | %s | %d | %v | %.0f (%.0f) | %s / %s / %s / %s | %s / %s | %.0f%% | %.0f%% |\n", h.Target, h.Load, h.Lost, h.Setup.Round(time.Second),
				h.RenewPerS, h.RequiredPerS, rng(h.P50Low, h.P50), rng(h.P99Low, h.P99), ms(h.P999), ms(h.Max), kib(h.PerLeaseLast), kib(h.PerLeasePeak),
				100*h.NodeCPUShare, 100*h.ClientCPUShare)
		}
		b.WriteString("\nCPU as a share of one core over the steady part (node) and the whole run (clients); leasehold's renew percentiles are the least–largest of its processes' own.\n")
	}
	return b.String()
}

func rng(lo, hi time.Duration) string {
	if lo == hi {
		return ms(hi)
	}
	return fmt.Sprintf("%.2f–%s", float64(lo)/1e6, ms(hi))
}
