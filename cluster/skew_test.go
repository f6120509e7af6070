package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/internal/testcluster"
)

// The clock-skew suite: a 3-node cluster whose nodes each run their own
// clock (clock.Skewed, driving the leader's lease countdowns) and clients
// whose own clocks run fast or slow (client.Config.Clock, on which their
// safe deadlines are counted). In each pair of a phase a holder A takes a
// resource without renewing and another client B waits for it; the test
// puts both beliefs on its own real clock: A believes from its grant until
// its safe deadline (clock.Skewed.RealAt of lease.Deadline), B from its
// grant. Exclusion is violated when A still believes at the instant B
// starts to; the client's safety margin (invariant 3), when A's deadline
// comes after the leader's countdown of its lease runs out (read from the
// leader in-process). Fencing: after B writes, A's fenced write must be
// refused.
//
// The allowance (client.Config Drift 10ms, DriftRatio 0.02) keeps A's
// deadline before the leader's expiry while leader rate / client rate ≤
// 1 / (1 − 0.02 − 10ms/TTL) (covered): 1.0256 for a 2s TTL, 1.0215 for 10s.
// Rates of 1 ± 1% (1.0202 at worst) are inside it; 1 ± 5% (1.105) and
// 1 ± 20% (1.5) are not, and there the checker must find violations.

// fullSkew runs the longer sweep (LEASEHOLD_FAULTS=full, as scripts/faults).
var fullSkew = os.Getenv("LEASEHOLD_FAULTS") == "full"

// The drift allowance: client.Config's defaults, and the smallest it
// takes (0 means the default), for a client that ignores clock drift.
const (
	allowanceDrift = 10 * time.Millisecond
	allowanceRatio = 0.02
	noDrift        = time.Nanosecond
	noDriftRatio   = 1e-12
)

// covered reports whether the allowance keeps a holder's safe deadline
// before the leader's expiry, whatever the round trips: the holder's
// deadline is (ttl(1 − ratio) − drift)/clientRate of real time after its
// send, the leader's expiry ttl/leaderRate after the grant's commit.
func covered(leaderRate, clientRate float64, ttl time.Duration) bool {
	return (float64(ttl)*(1-allowanceRatio)-float64(allowanceDrift))/clientRate <= float64(ttl)/leaderRate
}

// skewCluster is a 3-node cluster with a clock of its own per node.
type skewCluster struct {
	*testcluster.Cluster
	clocks map[string]*clock.Skewed // by node id
}

func startSkewCluster(t *testing.T) *skewCluster {
	clocks := map[string]*clock.Skewed{"n1": clock.NewSkewed(), "n2": clock.NewSkewed(), "n3": clock.NewSkewed()}
	c := testcluster.Start(t, 3, func(cfg *cluster.Config) { cfg.Clock = clocks[cfg.NodeID] })
	return &skewCluster{Cluster: c, clocks: clocks}
}

// index is node id's index in the cluster.
func (sc *skewCluster) index(id string) int {
	for i := range sc.Size() {
		if sc.ID(i) == id {
			return i
		}
	}
	panic("no node " + id)
}

// lead makes node id the leader.
func (sc *skewCluster) lead(t *testing.T, id string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		l := sc.WaitLeader(15 * time.Second)
		if sc.ID(l) == id {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("could not move the leadership to %s (leader %s)", id, sc.ID(l))
		}
		if n := sc.Node(l); n != nil {
			n.Cluster.TransferLeadership(id) // raft may refuse while id catches up: try again
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// skewClient is a client whose clock runs at rate, with the default drift
// allowance or (allowance false) none.
type skewClient struct {
	*client.Client
	clock     *clock.Skewed
	rate      float64
	allowance bool
}

func newSkewClient(t *testing.T, urls []string, rate float64, allowance bool) *skewClient {
	t.Helper()
	clk := clock.NewSkewed()
	clk.SetRate(rate)
	cfg := client.Config{Endpoints: urls, Clock: clk, Logger: slog.New(slog.DiscardHandler), RequestTimeout: 3 * time.Second}
	if !allowance {
		cfg.Drift, cfg.DriftRatio = noDrift, noDriftRatio
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &skewClient{Client: c, clock: clk, rate: rate, allowance: allowance}
}

func (c *skewClient) String() string {
	if c.allowance {
		return fmt.Sprintf("client %.4g", c.rate)
	}
	return fmt.Sprintf("client %.4g, no allowance", c.rate)
}

// handover is one pair's outcome, on the test's real clock.
type handover struct {
	holder       *skewClient
	aSent        time.Time // just before A's acquire was sent
	aUntil       time.Time // A's safe deadline
	leaderUntil  time.Time // when the leader's countdown of A's lease runs out
	bFrom        time.Time // B's grant
	staleRefused bool      // A's fenced write after B's was refused as stale
	believed     bool      // ... while A still believed it held the resource
}

// margin is how long before B's grant A stopped believing; below 0 both
// believed at once.
func (h handover) margin() time.Duration { return h.bFrom.Sub(h.aUntil) }

// slack is how long before the leader's expiry A's safe deadline came;
// below 0 A believed past it (invariant 3 broken). Unlike margin it leaves
// out the next holder's round trips, so it shows a short overlap on a
// loaded machine too.
func (h handover) slack() time.Duration { return h.leaderUntil.Sub(h.aUntil) }

// worstSlack is slack as it would be had the leader's countdown started
// the instant A sent its acquire (at leaderRate, for ttl): the most a
// client may count on (invariant 3), without the round trip that a loaded
// machine makes long enough to hide a clock-rate error beyond the
// allowance. Below 0 the allowance did not cover the rates.
func (h handover) worstSlack(ttl time.Duration, leaderRate float64) time.Duration {
	return h.aSent.Add(time.Duration(float64(ttl) / leaderRate)).Sub(h.aUntil)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// handOver runs one pair on resource: holder A takes it for ttl and does
// not renew; B (on the real clock), from bAfter after A's grant, waits for
// it, writes fenced, then A writes fenced with its old token.
func handOver(ctx context.Context, a *skewClient, b *client.Client, resource string, ttl, bAfter time.Duration,
	leaderExpiry func(lease uint64) (time.Time, error), granted func()) (handover, error) {
	h := handover{holder: a, aSent: time.Now()}
	la, err := a.Acquire(ctx, resource, client.TTL(ttl), client.ManualRenew())
	if err != nil {
		return h, fmt.Errorf("A acquire %s: %w", resource, err)
	}
	h.aUntil = a.clock.RealAt(la.Deadline())
	if h.leaderUntil, err = leaderExpiry(la.ID()); err != nil {
		return h, fmt.Errorf("%s: %w", resource, err)
	}
	if _, err := a.Put(ctx, resource+"/a", []byte("a"), client.Fence(resource, la.Token())); err != nil {
		return h, fmt.Errorf("A's fenced write while it holds %s: %w", resource, err)
	}
	granted()
	// B queues shortly before A's lease runs out on the leader, not at
	// once: a long wait would make it renew right after the grant (its
	// deadline counts from its send), a round trip more before it may
	// believe, which would hide a short overlap.
	sleepCtx(ctx, bAfter)
	lb, err := b.Acquire(ctx, resource, client.TTL(ttl), client.Wait(5*ttl), client.ManualRenew())
	if err != nil {
		return h, fmt.Errorf("B acquire %s: %w", resource, err)
	}
	h.bFrom = time.Now()
	defer lb.Release(context.WithoutCancel(ctx))
	if lb.Token() <= la.Token() {
		return h, fmt.Errorf("%s: B's token %d is not above A's %d", resource, lb.Token(), la.Token())
	}
	if _, err := b.Put(ctx, resource+"/b", []byte("b"), client.Fence(resource, lb.Token())); err != nil {
		return h, fmt.Errorf("B's fenced write to %s: %w", resource, err)
	}
	_, err = a.Put(ctx, resource+"/a", []byte("stale"), client.Fence(resource, la.Token()))
	h.believed = time.Now().Before(h.aUntil)
	switch {
	case errors.Is(err, leasehold.ErrStaleToken):
		h.staleRefused = true
	case err != nil:
		return h, fmt.Errorf("A's stale write to %s: %w", resource, err)
	}
	return h, nil
}

// skewPhase is one setting of the clocks and what the test expects of it.
type skewPhase struct {
	name   string
	x      float64       // nodes run at 1, 1+x, 1−x (n1, n2, n3); clients at 1±x
	leader string        // the node that leads while the holders hold
	kill   bool          // kill the leader once every A holds: a leader of another rate expires them
	ttl    time.Duration // A's and B's TTL
	pairs  int           // pairs per kind of holder
	// noAllowance adds holders that ignore the allowance.
	noAllowance bool
	// expect says what the checker must find among holder c's pairs.
	expect func(c *skewClient) expectation
}

type expectation int

const (
	holds expectation = iota // no violation: within the allowance
	// caught: beyond the allowance, the checker must find a holder whose
	// deadline outlived the leader's countdown.
	caught
	// caughtBoth: far beyond it, also two holders believing at once.
	caughtBoth
	measure // either, near the boundary: reported only
)

// phaseFigures are a phase's figures for one kind of holder.
type phaseFigures struct {
	phase, holder  string
	leaderRate     float64
	pairs          int
	pastExpiry     int // A believed past the leader's expiry
	minSlack       time.Duration
	pastWorst      int // ... past it had the countdown started at A's send
	minWorst       time.Duration
	violations     int // A and B believed at once
	minMargin      time.Duration
	staleRefused   int
	believedRefuse int // stale writes refused while A still believed
}

func runSkewPhase(t *testing.T, sc *skewCluster, p skewPhase) []phaseFigures {
	rates := map[string]float64{"n1": 1, "n2": 1 + p.x, "n3": 1 - p.x}
	for id, r := range rates {
		sc.clocks[id].SetRate(r)
	}
	sc.lead(t, p.leader)
	// The leader first: no forwarding hop in the round trips that the
	// checker's margins include.
	urls := []string{sc.URL(sc.index(p.leader))}
	for i, u := range sc.URLs() {
		if sc.ID(i) != p.leader {
			urls = append(urls, u)
		}
	}
	b := newSkewClient(t, urls, 1, true)
	// A new leader serves once it has raised the token counter: wait for
	// that, so the holders' round trips are the usual ones.
	warm, err := b.Acquire(context.Background(), "skew/warm-up", client.TTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	warm.Release(context.Background())
	var holders []*skewClient
	for _, r := range []float64{1 - p.x, 1 + p.x} {
		holders = append(holders, newSkewClient(t, urls, r, true))
		if p.noAllowance {
			holders = append(holders, newSkewClient(t, urls, r, false))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*p.ttl+30*time.Second)
	defer cancel()
	leaderClock, leader := sc.clocks[p.leader], sc.Node(sc.index(p.leader))
	leaderExpiry := func(lease uint64) (time.Time, error) {
		d, ok := leader.Cluster.ExpiresIn(lease)
		if !ok {
			return time.Time{}, fmt.Errorf("the leader %s has no countdown for lease %d", p.leader, lease)
		}
		return leaderClock.RealAt(leaderClock.Now().Add(d)), nil
	}

	var (
		mu      sync.Mutex
		results = map[*skewClient][]handover{}
		errs    []error
		wg      sync.WaitGroup
		held    sync.WaitGroup // every A holds
	)
	for hi, a := range holders {
		for k := range p.pairs {
			wg.Add(1)
			held.Add(1)
			go func() {
				defer wg.Done()
				once := sync.OnceFunc(held.Done)
				defer once()
				r := fmt.Sprintf("skew/%s/%d-%d", p.name, hi, k)
				sleepCtx(ctx, time.Duration(k)*20*time.Millisecond) // a round trip of its own for each A
				h, err := handOver(ctx, a, b.Client, r, p.ttl, time.Duration(0.7*float64(p.ttl)/rates[p.leader]), leaderExpiry, once)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				results[a] = append(results[a], h)
			}()
		}
	}
	if p.kill {
		held.Wait()
		old := sc.index(p.leader)
		sc.Kill(old)
		next := sc.WaitNewLeader(old, 15*time.Second)
		t.Logf("killed the leader %s (rate %.4g) while the holders held; %s (rate %.4g) took over",
			p.leader, rates[p.leader], sc.ID(next), rates[sc.ID(next)])
		defer sc.Restart(old)
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}

	var figs []phaseFigures
	for _, a := range holders {
		f := phaseFigures{phase: p.name, holder: a.String(), leaderRate: rates[p.leader], minMargin: time.Hour, minSlack: time.Hour, minWorst: time.Hour}
		for _, h := range results[a] {
			f.pairs++
			f.minSlack = min(f.minSlack, h.slack())
			if h.slack() < 0 {
				f.pastExpiry++
			}
			f.minWorst = min(f.minWorst, h.worstSlack(p.ttl, rates[p.leader]))
			if h.worstSlack(p.ttl, rates[p.leader]) < 0 {
				f.pastWorst++
			}
			f.minMargin = min(f.minMargin, h.margin())
			if h.margin() < 0 {
				f.violations++
			}
			if h.staleRefused {
				f.staleRefused++
				if h.believed {
					f.believedRefuse++
				}
			}
		}
		figs = append(figs, f)
		if f.staleRefused != f.pairs {
			t.Errorf("%s, %s: %d of %d stale writes accepted after the next holder's", p.name, a, f.pairs-f.staleRefused, f.pairs)
		}
		switch want := p.expect(a); want {
		case caught, caughtBoth:
			if f.pastWorst == 0 {
				t.Errorf("%s, %s: beyond the allowance the checker found no deadline past the leader's expiry counted from the send (closest %v)", p.name, a, f.minWorst)
			}
			if want == caughtBoth && f.violations == 0 {
				t.Errorf("%s, %s: far beyond the allowance the checker found no two holders at once (closest margin %v)", p.name, a, f.minMargin)
			}
		case holds:
			if f.pastExpiry > 0 {
				t.Errorf("%s, %s: %d of %d holders believed past the leader's expiry, by up to %v (invariant 3 broken within the allowance)",
					p.name, a, f.pastExpiry, f.pairs, -f.minSlack)
			}
			if f.violations > 0 {
				t.Errorf("%s, %s: %d of %d pairs believed they held at once, by up to %v (exclusion broken within the allowance)",
					p.name, a, f.violations, f.pairs, -f.minMargin)
			}
		}
	}
	return figs
}

// TestClockSkewRates runs pairs of holders under clock rates within the
// allowance (±1%: no violation, with a leader change to a node of another
// rate), beyond it (±5%, ±20%: the checker catches the slow holder of a
// fast leader, and the fence refuses its stale write), and a holder that
// ignores the allowance, caught at ±1%. It prints the figures.
func TestClockSkewRates(t *testing.T) {
	sc := startSkewCluster(t)
	slowHolderCaught := func(c *skewClient) expectation {
		if c.rate < 1 {
			return caught
		}
		return holds
	}
	allHold := func(*skewClient) expectation { return holds }
	phases := []skewPhase{
		// A holder without the allowance overlaps the next by 2% of the
		// TTL less the round trips (its deadline counts from before its
		// send, the server's countdown from the commit; the next holder
		// believes once its answer is back): a long TTL shows it, and the
		// allowance is what keeps the holders beside it apart.
		{name: "1%", x: 0.01, leader: "n2", ttl: 10 * time.Second, pairs: 2, noAllowance: true,
			expect: func(c *skewClient) expectation {
				if c.rate < 1 && !c.allowance {
					return caught
				}
				return holds
			}},
		{name: "1%-slow-leader", x: 0.01, leader: "n3", ttl: 2 * time.Second, pairs: 2, expect: allHold},
		{name: "1%-leader-killed", x: 0.01, leader: "n2", kill: true, ttl: 2 * time.Second, pairs: 2, expect: allHold},
		{name: "5%", x: 0.05, leader: "n2", ttl: 4 * time.Second, pairs: 3, expect: slowHolderCaught},
		// 4s: two holders at once by more than a loaded machine's round trips.
		{name: "20%", x: 0.20, leader: "n2", ttl: 4 * time.Second, pairs: 2, expect: func(c *skewClient) expectation {
			if c.rate < 1 {
				return caughtBoth
			}
			return holds
		}},
	}
	if fullSkew {
		// The boundary, finer: at a 2s TTL the allowance covers a leader
		// at 1+x and a holder at 1−x up to x = 1.27%; past it a violation
		// needs B's grant to come sooner after the expiry than the gap.
		for _, x := range []float64{0.0110, 0.0125, 0.0150, 0.0200, 0.0300} {
			phases = append(phases, skewPhase{name: fmt.Sprintf("%.2f%%", 100*x), x: x, leader: "n2", ttl: 2 * time.Second, pairs: 6,
				expect: func(c *skewClient) expectation {
					if covered(1+x, c.rate, 2*time.Second) {
						return holds
					}
					return measure
				}})
		}
	}
	var figs []phaseFigures
	for _, p := range phases {
		t.Run(p.name, func(t *testing.T) { figs = append(figs, runSkewPhase(t, sc, p)...) })
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\tleader rate\tholder\tpairs\tpast expiry\tclosest slack\tpast expiry from send\tclosest\tboth believed\tclosest margin\tstale refused (while A believed)")
	for _, f := range figs {
		fmt.Fprintf(tw, "%s\t%.4g\t%s\t%d\t%d\t%v\t%d\t%v\t%d\t%v\t%d/%d (%d)\n", f.phase, f.leaderRate, f.holder, f.pairs,
			f.pastExpiry, f.minSlack.Round(100*time.Microsecond), f.pastWorst, f.minWorst.Round(100*time.Microsecond), f.violations, f.minMargin.Round(100*time.Microsecond),
			f.staleRefused, f.pairs, f.believedRefuse)
	}
	tw.Flush()
	t.Logf("clock skew: past expiry, A's safe deadline after the leader's expiry of its lease (slack below 0); "+
		"past expiry from send, the same had the leader's countdown started at A's send (no round trip); "+
		"both believed, A still believing when B's grant came back (margin below 0)\n%s", b.String())
}

// TestClockSkewWallStep steps the leader's wall clock by +1h and -1h while
// a lease is held, as `date -s` or an NTP step does to a host: expiry is
// counted on the monotonic clock, so the lease neither ends early nor
// lives long, the durations shown (held for, expires in) do not see the
// step, and the wall times shown (acquired at, the audit's) follow the
// node's wall clock. (The retry window and queue retention are measured
// on the leader's wall clock: see the README, "Clocks".)
func TestClockSkewWallStep(t *testing.T) {
	clk := clock.NewSkewed()
	n := testcluster.StartNode(t, "", func(cfg *cluster.Config) { cfg.Clock = clk })
	c, err := client.New(client.Config{Endpoints: []string{n.URL}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ttl = 2 * time.Second
	nearWall := func(what string, got time.Time) {
		t.Helper()
		if d := got.Sub(clk.Now()); d < -5*time.Second || d > 5*time.Second {
			t.Errorf("%s is %v, %v off the node's wall clock", what, got, d)
		}
	}
	for _, step := range []time.Duration{time.Hour, -time.Hour} {
		resource := fmt.Sprintf("wall/%v", step)
		aFrom := time.Now()
		a, err := c.Acquire(ctx, resource, client.TTL(ttl), client.ManualRenew())
		if err != nil {
			t.Fatal(err)
		}
		clk.JumpWall(step)
		locks, err := c.Locks(ctx, client.LocksQuery{Resource: resource})
		if err != nil || len(locks) != 1 || locks[0].Holder == nil {
			t.Fatalf("locks %s after the step: %v %+v", resource, err, locks)
		}
		if l := locks[0]; l.HeldFor < 0 || l.HeldFor > time.Since(aFrom) || l.Holder.ExpiresIn > ttl || l.Holder.ExpiresIn <= 0 {
			t.Errorf("step %v: held for %v, expires in %v: the durations shown saw the step", step, l.HeldFor, l.Holder.ExpiresIn)
		}
		b, err := c.Acquire(ctx, resource, client.TTL(time.Minute), client.Wait(ttl+5*time.Second))
		if err != nil {
			t.Fatalf("step %v: the next holder was not granted %v after the lease's grant (it lives long): %v", step, ttl+5*time.Second, err)
		}
		bFrom := time.Now()
		if bFrom.Before(a.Deadline()) {
			t.Errorf("step %v: the lease ended %v before its holder's safe deadline", step, a.Deadline().Sub(bFrom))
		}
		if lived := bFrom.Sub(aFrom); lived > ttl+time.Second {
			t.Errorf("step %v: a %v lease lived %v", step, ttl, lived)
		}
		info, err := c.Get(ctx, resource)
		if err != nil || info.Holder == nil {
			t.Fatalf("get %s: %v %+v", resource, err, info)
		}
		nearWall(fmt.Sprintf("step %v: the next holder's acquired-at", step), info.Holder.AcquiredAt)
		if _, err := c.ForceRelease(ctx, resource, b.ID(), "clock-skew test"); err != nil {
			t.Fatal(err)
		}
		recs, _, err := c.Audit(ctx, 0, 1)
		if err != nil || len(recs) != 1 {
			t.Fatalf("audit: %v %+v", err, recs)
		}
		nearWall(fmt.Sprintf("step %v: the audit record's time", step), recs[0].Time)
	}
}
