package bench

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/fsm"
)

// The smoke tests and benchmarks share one embedded node, started on first
// use: a real raft node with its fsync'd log in a temp dir.
var (
	nodeOnce sync.Once
	node     *Embedded
	nodeErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if node != nil {
		node.Close()
	}
	os.Exit(code)
}

func sharedNode(tb testing.TB) *Embedded {
	tb.Helper()
	nodeOnce.Do(func() { node, nodeErr = StartEmbedded(context.Background(), EmbeddedOptions{}) })
	if nodeErr != nil {
		tb.Fatal(nodeErr)
	}
	return node
}

func smokeConfig(tb testing.TB, workload string) Config {
	return Config{
		Endpoints: []string{sharedNode(tb).URL}, Target: "embedded", Workload: workload,
		Clients: 4, Resources: 64, Leases: 40, Duration: 1500 * time.Millisecond, Warmup: 200 * time.Millisecond,
		Wait:     10 * time.Second,
		LogIndex: func() uint64 { return sharedNode(tb).Node.Stats().CommitIndex },
	}
}

// checkOps asserts what every sane report shows: samples, and percentiles
// in order.
func checkOps(t *testing.T, rep *Report, names ...string) {
	t.Helper()
	if len(rep.Ops) != len(names) {
		t.Fatalf("ops %+v, want %v", rep.Ops, names)
	}
	for i, o := range rep.Ops {
		if o.Name != names[i] {
			t.Errorf("op %d is %q, want %q", i, o.Name, names[i])
		}
		if o.Count == 0 || o.PerSecond <= 0 {
			t.Errorf("%s: no samples: %+v", o.Name, o)
		}
		seq := []float64{o.MinMs, o.P50Ms, o.P90Ms, o.P99Ms, o.P999Ms, o.MaxMs}
		for j := 1; j < len(seq); j++ {
			if seq[j] < seq[j-1] {
				t.Errorf("%s: percentiles out of order: %v", o.Name, seq)
				break
			}
		}
		if o.MeanMs < o.MinMs || o.MeanMs > o.MaxMs {
			t.Errorf("%s: mean %v outside [%v, %v]", o.Name, o.MeanMs, o.MinMs, o.MaxMs)
		}
	}
	if rep.MeasuredSeconds <= 0 || rep.Interrupted {
		t.Errorf("measured %vs, interrupted %v", rep.MeasuredSeconds, rep.Interrupted)
	}
}

// checkIdle asserts the run left no lease or waiter behind.
func checkIdle(t *testing.T) {
	t.Helper()
	var c fsm.Counts
	deadline := time.Now().Add(5 * time.Second)
	for {
		c = sharedNode(t).Node.Stats().Counts
		if c.Leases == 0 && c.Waiters == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if c.Leases != 0 || c.Waiters != 0 {
		t.Errorf("after the run the node holds %d leases and %d waiters", c.Leases, c.Waiters)
	}
}

func TestLockSmoke(t *testing.T) {
	rep, err := Run(t.Context(), smokeConfig(t, Lock))
	if err != nil {
		t.Fatal(err)
	}
	checkOps(t, rep, "acquire", "release")
	if rep.Throughput.Unit != "pairs" || rep.Throughput.Count == 0 || rep.Throughput.PerSecond <= 0 {
		t.Errorf("throughput %+v", rep.Throughput)
	}
	if rep.LogEntries == 0 || rep.LogEntriesPerOp <= 0 || rep.CPUPerOpUs <= 0 {
		t.Errorf("log entries %d (%v per pair), cpu %vµs per pair", rep.LogEntries, rep.LogEntriesPerOp, rep.CPUPerOpUs)
	}
	if n := rep.Ops[1].Count; n != rep.Throughput.Count {
		t.Errorf("%d releases measured for %d pairs", n, rep.Throughput.Count)
	}
	if len(rep.Errors) != 0 {
		t.Errorf("errors: %v", rep.Errors)
	}
	checkIdle(t)
}

func TestLockOps(t *testing.T) {
	cfg := smokeConfig(t, Lock)
	cfg.Duration, cfg.Ops, cfg.Hold = 0, 150, time.Millisecond
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Throughput.Count != 150 || rep.Ops[1].Count != 150 {
		t.Errorf("measured %d pairs and %d releases, want 150", rep.Throughput.Count, rep.Ops[1].Count)
	}
	if len(rep.Errors) != 0 {
		t.Errorf("errors: %v", rep.Errors)
	}
	checkIdle(t)
}

func TestContendSmoke(t *testing.T) {
	rep, err := Run(t.Context(), smokeConfig(t, Contend))
	if err != nil {
		t.Fatal(err)
	}
	checkOps(t, rep, "wait", "release")
	if rep.Throughput.Unit != "grants" || rep.Throughput.Count == 0 {
		t.Errorf("throughput %+v", rep.Throughput)
	}
	f := rep.Fairness
	if f == nil || f.Clients != 4 || f.GrantsMax == 0 || f.MeanWaitMs <= 0 || f.JainIndex <= 0 {
		t.Fatalf("fairness %+v", f)
	}
	if len(rep.Errors) != 0 {
		t.Errorf("errors: %v", rep.Errors)
	}
	checkIdle(t)
}

func TestRenewSmoke(t *testing.T) {
	cfg := smokeConfig(t, Renew)
	cfg.TTL = 1500 * time.Millisecond // renewed every 500ms
	cfg.Duration = 2 * time.Second
	cfg.Cleanup = true
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkOps(t, rep, "renew", "renew lag")
	var svg bytes.Buffer
	if err := rep.WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, &svg)
	r := rep.Renew
	if r == nil || r.Granted != 40 || r.Lost != 0 || r.HeldAtEnd != 40 || r.Released != 40 {
		t.Fatalf("renew report %+v", r)
	}
	// Each lease is due every 500ms: about 80 renewals/s.
	if rep.Throughput.Count < 40 || r.RequiredRate != 80 {
		t.Errorf("%d renewals measured, required rate %v", rep.Throughput.Count, r.RequiredRate)
	}
	if len(rep.Errors) != 0 {
		t.Errorf("errors: %v", rep.Errors)
	}
	checkIdle(t)
}

// Two renew runs at once, each with its own LeasePrefix, hold their
// leases side by side, and without Cleanup leave them held at the end
// (the million-lease run holds them across a restart that way), each run
// an owner of its own.
func TestRenewRunsSideBySideLeaveTheirLeasesHeld(t *testing.T) {
	var wg sync.WaitGroup
	reps := make([]*Report, 2)
	for i := range reps {
		cfg := smokeConfig(t, Renew)
		cfg.TTL = 1500 * time.Millisecond
		cfg.Duration = time.Second
		cfg.LeasePrefix = fmt.Sprintf("bench/side/%d", i)
		wg.Go(func() {
			rep, err := Run(t.Context(), cfg)
			if err != nil {
				t.Error(err)
			}
			reps[i] = rep
		})
	}
	wg.Wait()
	c, err := client.New(client.Config{Endpoints: []string{sharedNode(t).URL}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, rep := range reps {
		if rep == nil || rep.Renew.Granted != 40 || rep.Renew.Lost != 0 || rep.Renew.Released != 0 {
			t.Fatalf("run %d: renew report %+v", i, rep.Renew)
		}
		n := 0
		for l, err := range c.Leases(t.Context(), fmt.Sprintf("bench/side/%d/", i)) {
			if err != nil {
				t.Fatal(err)
			}
			// Each run is an owner of its own: a node refuses an owner
			// more than --max-leases-per-owner.
			if want := fmt.Sprintf("leasehold-bench bench/side/%d", i); l.Owner != want {
				t.Errorf("run %d: lease %v is owned by %q, want %q", i, l.Resources, l.Owner, want)
			}
			n++
		}
		if n != 40 {
			t.Errorf("run %d: %d leases held under its prefix after the run, want its 40", i, n)
		}
	}
	time.Sleep(1500 * time.Millisecond) // they lapse at their TTL
	checkIdle(t)
}

func TestInterrupt(t *testing.T) {
	cfg := smokeConfig(t, Contend)
	cfg.Duration = time.Minute
	cfg.Hold = 5 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
	defer cancel()
	start := time.Now()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Interrupted {
		t.Error("not marked interrupted")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v to stop", d)
	}
	if len(rep.Errors) != 0 {
		t.Errorf("stopping was counted as errors: %v", rep.Errors)
	}
	checkIdle(t)
}

func TestStartEmbeddedTwice(t *testing.T) {
	// A second node of its own, closed while idle: Close must return and
	// remove its directory.
	e, err := StartEmbedded(t.Context(), EmbeddedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := e.Dir()
	done := make(chan error, 1)
	go func() { done <- e.Close() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("data dir %s left behind", dir)
	}
}

// benchPairs measures acquire+release pairs against the shared node from
// parallel clients, on random resources among 1024.
func benchPairs(b *testing.B, clients int) {
	n := sharedNode(b)
	names := make([]string, 1024)
	for i := range names {
		names[i] = fmt.Sprintf("bench/go/%d", i)
	}
	opts := []client.Option{client.TTL(15 * time.Second), client.Wait(10 * time.Second),
		client.ManualRenew(), client.ProgressTimeout(0)}
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((clients + procs - 1) / procs)
	var seed atomic.Uint64
	ctx := b.Context()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		c, err := client.New(client.Config{Endpoints: []string{n.URL}})
		if err != nil {
			b.Error(err)
			return
		}
		rng := rand.New(rand.NewPCG(seed.Add(1), 0))
		for pb.Next() {
			l, err := c.Acquire(ctx, names[rng.IntN(len(names))], opts...)
			if err != nil {
				b.Error(err)
				return
			}
			if err := l.Release(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pairs/s")
}

// BenchmarkAcquireRelease16: 16 concurrent clients (rounded up to a
// multiple of GOMAXPROCS).
func BenchmarkAcquireRelease16(b *testing.B) { benchPairs(b, 16) }

// BenchmarkAcquireRelease64: 64 concurrent clients.
func BenchmarkAcquireRelease64(b *testing.B) { benchPairs(b, 64) }

// BenchmarkAcquireRelease1: one client, so each pair costs two round trips
// and two commits.
func BenchmarkAcquireRelease1(b *testing.B) {
	n := sharedNode(b)
	c, err := client.New(client.Config{Endpoints: []string{n.URL}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	start := time.Now()
	for i := 0; b.Loop(); i++ {
		l, err := c.Acquire(ctx, fmt.Sprintf("bench/go1/%d", i%1024), client.ManualRenew(), client.ProgressTimeout(0))
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pairs/s")
}
