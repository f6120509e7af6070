package integration

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/client"

	"github.com/leasehold/leasehold/internal/testcluster"
)

// A history of what clients saw, checked after the run against the
// invariants: unique tokens, tokens that follow real time per resource,
// leases that never vanish before their TTL, and holders whose client-side
// safe intervals never overlap on one resource. Porcupine then checks the
// whole history against a sequential lock model (linearizability).

// grantRec is one lease as its holder saw it. Times are the client's own
// monotonic clock readings (one process, one clock).
type grantRec struct {
	client   int
	resource string
	token    uint64
	id       uint64
	sent     time.Time // before Acquire was called
	ack      time.Time // Acquire returned the grant
	lastOK   time.Time // before the last successful renew was sent (or sent)
	deadline time.Time // the latest local deadline the client believed
	end      time.Time // min(release sent, deadline): end of the safe interval
	// How it ended.
	released       bool // a release was acknowledged
	releaseUnknown bool // a release was sent, its outcome is unknown
}

// lockIn / lockOut are porcupine inputs and outputs for one resource.
type lockOp uint8

const (
	opAcquire lockOp = iota
	opRenew
	opRelease
)

func (o lockOp) String() string { return [...]string{"acquire", "renew", "release"}[o] }

type lockResult uint8

const (
	resOK lockResult = iota
	resHeld
	resNotFound
	resUnknown // no answer: it may or may not have taken effect
)

func (r lockResult) String() string { return [...]string{"ok", "held", "not_found", "unknown"}[r] }

type lockIn struct {
	op       lockOp
	resource string
	lease    uint64 // renew, release, and a granted acquire
}

type lockOut struct {
	res   lockResult
	token uint64 // granted acquire
}

// lockState is one resource in the model. holder 0 means free;
// unknownHolder a grant whose requester never learned of it.
type lockState struct {
	holder uint64
	last   uint64 // largest token known to be granted
}

const unknownHolder = math.MaxUint64

// lockModel is a lock whose holder may expire at any moment (the TTL rule
// is checked on timestamps separately): a grant needs a free resource and a
// larger token, renew and release succeed only for the holder, and a lease
// no longer held answers not-found.
var lockModel = porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			r := op.Input.(lockIn).resource
			if _, ok := by[r]; !ok {
				keys = append(keys, r)
			}
			by[r] = append(by[r], op)
		}
		sort.Strings(keys)
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() []any { return []any{lockState{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(lockState), input.(lockIn), output.(lockOut)
		pre := []lockState{s}
		if s.holder != 0 {
			pre = append(pre, lockState{last: s.last}) // it expired first
		}
		var next []any
		for _, p := range pre {
			switch in.op {
			case opAcquire:
				switch out.res {
				case resOK:
					if p.holder == 0 && out.token > p.last {
						next = append(next, lockState{holder: in.lease, last: out.token})
					}
				case resHeld:
					if p.holder != 0 {
						next = append(next, p)
					}
				default: // unknown: granted to nobody we know of, or nothing
					next = append(next, p)
					if p.holder == 0 {
						next = append(next, lockState{holder: unknownHolder, last: p.last})
					}
				}
			case opRenew:
				switch out.res {
				case resOK:
					if p.holder == in.lease {
						next = append(next, p)
					}
				case resNotFound:
					if p.holder != in.lease {
						next = append(next, p)
					}
				default:
					next = append(next, p)
				}
			case opRelease:
				switch out.res {
				case resOK:
					if p.holder == in.lease {
						next = append(next, lockState{last: p.last})
					}
				case resNotFound:
					if p.holder != in.lease {
						next = append(next, p)
					}
				default:
					next = append(next, p)
					if p.holder == in.lease {
						next = append(next, lockState{last: p.last})
					}
				}
			}
		}
		return next
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(lockIn), output.(lockOut)
		if in.op == opAcquire && out.res == resOK {
			return fmt.Sprintf("acquire(%s) -> lease %d token %d", in.resource, in.lease, out.token)
		}
		return fmt.Sprintf("%s(%s, %d) -> %s", in.op, in.resource, in.lease, out.res)
	},
	DescribeState: func(state any) string {
		s := state.(lockState)
		return fmt.Sprintf("holder=%d last=%d", s.holder, s.last)
	},
}

// recorder collects the history of every client.
type recorder struct {
	base       time.Time
	mu         sync.Mutex
	grants     []*grantRec
	ops        []porcupine.Operation
	violations []string
	counts     map[string]int
	errs       []string
}

func newRecorder() *recorder {
	return &recorder{base: time.Now(), counts: map[string]int{}}
}

func (r *recorder) op(clientID int, in lockIn, out lockOut, call, ret time.Time) {
	o := porcupine.Operation{ClientId: clientID, Input: in, Output: out, Call: call.Sub(r.base).Nanoseconds()}
	if out.res == resUnknown {
		o.Return = math.MaxInt64 // it may take effect at any later time
	} else {
		o.Return = ret.Sub(r.base).Nanoseconds()
	}
	r.mu.Lock()
	r.ops = append(r.ops, o)
	r.mu.Unlock()
}

func (r *recorder) count(what string) {
	r.mu.Lock()
	r.counts[what]++
	r.mu.Unlock()
}

// unexpected notes an error that was neither an answer nor retried away.
func (r *recorder) unexpected(what string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts[what+": "+leasehold.CodeOf(err).String()]++
	if len(r.errs) < 20 {
		r.errs = append(r.errs, fmt.Sprintf("%s: %v", what, err))
	}
}

func (r *recorder) violate(format string, args ...any) {
	r.mu.Lock()
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *recorder) addGrant(g *grantRec) {
	r.mu.Lock()
	r.grants = append(r.grants, g)
	r.mu.Unlock()
}

// historyConfig shapes the client workload.
type historyConfig struct {
	resources int
	ttl       time.Duration
	opTimeout time.Duration // ctx of one Acquire / Renew / Release call
}

// runLockClient runs acquire / renew / release loops until stop closes.
func runLockClient(id int, cl *client.Client, cfg historyConfig, rec *recorder, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	sleep := func(d time.Duration) {
		select {
		case <-stop:
		case <-time.After(d):
		}
	}
	for !stopped() {
		res := fmt.Sprintf("res/%02d", rng.IntN(cfg.resources))
		sent := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), cfg.opTimeout)
		l, err := cl.Acquire(ctx, res, client.TTL(cfg.ttl), client.ManualRenew(), client.Owner(fmt.Sprintf("c%d", id)))
		cancel()
		ack := time.Now()
		switch {
		case err == nil:
		case errors.Is(err, leasehold.ErrHeld):
			rec.count("acquire held")
			rec.op(id, lockIn{op: opAcquire, resource: res}, lockOut{res: resHeld}, sent, ack)
			sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
			continue
		default:
			rec.unexpected("acquire unknown", err)
			rec.op(id, lockIn{op: opAcquire, resource: res}, lockOut{res: resUnknown}, sent, ack)
			continue
		}
		rec.count("acquire granted")
		g := &grantRec{client: id, resource: res, token: l.Token(), id: l.ID(), sent: sent, ack: ack,
			lastOK: sent, deadline: l.Deadline()}
		rec.addGrant(g)
		rec.op(id, lockIn{op: opAcquire, resource: res, lease: g.id}, lockOut{res: resOK, token: g.token}, sent, ack)

		lost := false
		renews := rng.IntN(4)
		for k := 0; k < renews && !lost; k++ {
			sleep(time.Duration(50+rng.IntN(300)) * time.Millisecond)
			rs := time.Now()
			if !rs.Before(g.deadline) {
				rec.count("lease lapsed before a renew")
				lost = true
				break
			}
			ctx, cancel := context.WithTimeout(context.Background(), cfg.opTimeout)
			err := l.Renew(ctx)
			cancel()
			re := time.Now()
			switch {
			case err == nil:
				rec.count("renew ok")
				g.lastOK = rs
				if d := l.Deadline(); d.After(g.deadline) {
					g.deadline = d
				}
				rec.op(id, lockIn{op: opRenew, resource: res, lease: g.id}, lockOut{res: resOK}, rs, re)
			case errors.Is(err, leasehold.ErrNotFound) || errors.Is(err, leasehold.ErrNotHolder):
				rec.count("renew not found")
				// The lease ended before the renewal was applied, which is
				// before its answer came back: only an answer that came back
				// before the local deadline proves the lease ended early. (A
				// request sent in time can be delayed by a failover past
				// the deadline, and then rightly find the lease gone.)
				if re.Before(g.deadline) {
					rec.violate("lease %d (token %d) on %s: renew answered %v before the local deadline: %v",
						g.id, g.token, res, g.deadline.Sub(re), err)
				}
				rec.op(id, lockIn{op: opRenew, resource: res, lease: g.id}, lockOut{res: resNotFound}, rs, re)
				lost = true
			default:
				// No answer in time: the lease may have been extended or not;
				// renewals have no effect in the model, so none is recorded.
				rec.unexpected("renew unknown", err)
			}
		}
		if !lost && rng.IntN(10) == 0 {
			// Let it lapse: stop renewing and release only after the
			// local deadline (expect not-found, or ok if not yet expired).
			rec.count("let lapse")
			sleep(time.Until(g.deadline) + 20*time.Millisecond)
		}
		rs := time.Now()
		g.end = rs
		if g.deadline.Before(rs) {
			g.end = g.deadline
		}
		ctx, cancel = context.WithTimeout(context.Background(), cfg.opTimeout)
		err = l.Release(ctx)
		cancel()
		re := time.Now()
		switch {
		case err == nil:
			rec.count("release ok")
			g.released = true
			rec.op(id, lockIn{op: opRelease, resource: res, lease: g.id}, lockOut{res: resOK}, rs, re)
		case errors.Is(err, leasehold.ErrNotFound):
			rec.count("release not found")
			if re.Before(g.deadline) { // see "renew not found" above
				rec.violate("lease %d (token %d) on %s: release answered %v before the local deadline: %v",
					g.id, g.token, res, g.deadline.Sub(re), err)
			}
			rec.op(id, lockIn{op: opRelease, resource: res, lease: g.id}, lockOut{res: resNotFound}, rs, re)
		default:
			rec.unexpected("release unknown", err)
			g.releaseUnknown = true
			rec.op(id, lockIn{op: opRelease, resource: res, lease: g.id}, lockOut{res: resUnknown}, rs, re)
		}
	}
}

// reporter is the part of testing.TB the history check reports to.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
}

// checkHistory asserts the invariants over every grant recorded.
func checkHistory(t reporter, rec *recorder, ttl time.Duration) {
	t.Helper()
	for _, v := range rec.violations {
		t.Errorf("%s", v)
	}
	byToken := map[uint64]*grantRec{}
	byRes := map[string][]*grantRec{}
	for _, g := range rec.grants {
		if g.token == 0 || g.id == 0 {
			t.Errorf("grant on %s with token %d, id %d", g.resource, g.token, g.id)
		}
		if o := byToken[g.token]; o != nil {
			t.Errorf("token %d issued twice: to client %d on %s and to client %d on %s",
				g.token, o.client, o.resource, g.client, g.resource)
		}
		byToken[g.token] = g
		byRes[g.resource] = append(byRes[g.resource], g)
	}
	pairs := 0
	for res, gs := range byRes {
		sort.Slice(gs, func(i, j int) bool { return gs[i].token < gs[j].token })
		for i := range gs {
			for j := i + 1; j < len(gs); j++ {
				a, b := gs[i], gs[j] // a.token < b.token: a was granted first
				pairs++
				// Real time never contradicts token order: a grant acked
				// before another was even requested has the smaller token.
				if b.ack.Before(a.sent) {
					t.Errorf("%s: token %d acked %v before token %d was requested", res, b.token, a.sent.Sub(b.ack), a.token)
				}
				// Client-side safe intervals never overlap.
				if !a.end.Before(b.ack) {
					t.Errorf("%s: holders overlap: token %d held (client side) until %v after token %d was acked",
						res, a.token, a.end.Sub(b.ack), b.token)
				}
				// The server's TTL rule: a lease that lapsed ran at least
				// its TTL from the send of its last successful renewal.
				if !a.released && !a.releaseUnknown {
					if held := b.ack.Sub(a.lastOK); held < ttl {
						t.Errorf("%s: lease %d (token %d) lapsed and was re-granted (token %d) only %v after its last renewal was sent; TTL %v",
							res, a.id, a.token, b.token, held, ttl)
					}
				}
			}
		}
	}
	t.Logf("history: %d grants, %d same-resource pairs checked, %d porcupine operations", len(rec.grants), pairs, len(rec.ops))

	model := lockModel.ToModel()
	res, info := porcupine.CheckOperationsVerbose(model, rec.ops, 30*time.Second)
	switch res {
	case porcupine.Ok:
		t.Logf("porcupine: the history is linearizable under the lock model")
	case porcupine.Unknown:
		t.Logf("porcupine: check timed out (not counted as a failure)")
	default:
		if _, real := t.(*testing.T); !real {
			t.Errorf("porcupine: the history is NOT linearizable")
			break
		}
		path := filepath.Join(os.TempDir(), fmt.Sprintf("leasehold-history-%d.html", time.Now().UnixNano()))
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			t.Errorf("porcupine: the history is NOT linearizable (visualization failed: %v)", err)
		} else {
			t.Errorf("porcupine: the history is NOT linearizable; see %s", path)
		}
	}
}

func formatCounts(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, m[k])
	}
	return b.String()
}

// TestFailoverHistory: 8 clients run acquire / renew / release loops on 32
// resources against 3 nodes while the leader is killed three times (kill,
// wait for a new leader, restart the old one). The recorded history must
// keep every invariant.
func TestFailoverHistory(t *testing.T) {
	const (
		clients = 8
		kills   = 3
	)
	cfg := historyConfig{resources: 32, ttl: 1500 * time.Millisecond, opTimeout: 8 * time.Second}
	c := testcluster.Start(t, 3)
	rec := newRecorder()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range clients {
		cl := newTestClient(t, time.Second, c.URLs()...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			runLockClient(i, cl, cfg, rec, stop)
		}()
	}

	type failover struct {
		killed, elected            string
		oldTerm, newTerm           uint64
		kill, election, catchingUp time.Duration
	}
	var fos []failover
	for range kills {
		time.Sleep(1500 * time.Millisecond) // traffic under this leader
		old := c.WaitLeader(10 * time.Second)
		oldTerm := c.Node(old).Cluster.LocalStatus().Term
		killed := time.Now()
		c.Kill(old)
		killTook := time.Since(killed)
		next := c.WaitNewLeader(old, 10*time.Second)
		fo := failover{killed: c.ID(old), elected: c.ID(next), oldTerm: oldTerm, election: time.Since(killed), kill: killTook}
		if n := c.Node(next); n != nil {
			fo.newTerm = n.Cluster.LocalStatus().Term
		}
		if fo.newTerm <= oldTerm {
			t.Errorf("new leader %s has term %d, not above the killed leader's %d", fo.elected, fo.newTerm, oldTerm)
		}
		time.Sleep(700 * time.Millisecond) // traffic with one node down
		c.Restart(old)
		restarted := time.Now()
		if err := c.WaitApplied(leaderIndex(t, c), 15*time.Second); err != nil {
			t.Fatalf("restarted %s did not catch up: %v", c.ID(old), err)
		}
		fo.catchingUp = time.Since(restarted)
		fos = append(fos, fo)
	}
	time.Sleep(time.Second)
	close(stop)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("clients did not stop within 30s")
	}
	for i, fo := range fos {
		t.Logf("failover %d: killed %s (term %d; Kill took %v) -> new leader %s (term %d) after %v; restarted node caught up in %v",
			i+1, fo.killed, fo.oldTerm, fo.kill.Round(time.Millisecond), fo.elected, fo.newTerm,
			fo.election.Round(time.Millisecond), fo.catchingUp.Round(time.Millisecond))
	}
	if len(fos) != kills {
		t.Fatalf("%d failovers, want %d", len(fos), kills)
	}
	t.Logf("client outcomes: %s", formatCounts(rec.counts))
	for _, e := range rec.errs {
		t.Logf("client error: %s", e)
	}
	for i := range c.Size() {
		t.Logf("%s: api %s, raft %s", c.ID(i), c.URL(i), c.RaftAddr(i))
	}
	if rec.counts["acquire granted"] < 30 {
		t.Errorf("only %d grants: the workload did not run", rec.counts["acquire granted"])
	}
	checkHistory(t, rec, cfg.ttl)
	idx, size := waitSameState(t, c, 20*time.Second)
	if l := c.Leader(); l >= 0 {
		t.Logf("leases ended as applied on %s (restarted nodes count from their restart): %s", c.ID(l), endedByReason(t, c.Node(l)))
	}
	t.Logf("all replicas at index %d with identical state (%d bytes)", idx, size)
}

// collect is a reporter that keeps what it is told.
type collect struct{ errs, logs []string }

func (c *collect) Helper() {}
func (c *collect) Errorf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}
func (c *collect) Logf(format string, args ...any) {
	c.logs = append(c.logs, fmt.Sprintf(format, args...))
}

// TestHistoryCheckerCatchesViolations feeds the history check made-up
// histories, each breaking one invariant, so a passing TestFailoverHistory
// means something.
func TestHistoryCheckerCatchesViolations(t *testing.T) {
	const ttl = time.Second
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	type g struct {
		token              uint64
		sent, ack, lastOK  time.Duration
		end                time.Duration
		released, notFound bool
	}
	build := func(gs ...g) *recorder {
		rec := newRecorder()
		at := func(d time.Duration) time.Time { return rec.base.Add(d) }
		for i, x := range gs {
			gr := &grantRec{client: i, resource: "r", token: x.token, id: x.token, sent: at(x.sent), ack: at(x.ack),
				lastOK: at(x.lastOK), deadline: at(x.end), end: at(x.end), released: x.released}
			rec.addGrant(gr)
			rec.op(i, lockIn{op: opAcquire, resource: "r", lease: gr.id}, lockOut{res: resOK, token: gr.token}, gr.sent, gr.ack)
			out := lockOut{res: resOK}
			if x.notFound {
				out.res = resNotFound
			}
			rec.op(i, lockIn{op: opRelease, resource: "r", lease: gr.id}, out, gr.end, gr.end.Add(ms(1)))
		}
		return rec
	}
	cases := []struct {
		name string
		rec  *recorder
		want string
	}{
		{"fine", build(
			g{token: 5, sent: 0, ack: ms(10), lastOK: 0, end: ms(100), released: true},
			g{token: 9, sent: ms(50), ack: ms(120), lastOK: ms(50), end: ms(200), released: true},
		), ""},
		{"token issued twice", build(
			g{token: 5, sent: 0, ack: ms(10), lastOK: 0, end: ms(100), released: true},
			g{token: 5, sent: ms(150), ack: ms(160), lastOK: ms(150), end: ms(200), released: true},
		), "issued twice"},
		{"tokens against real time", build(
			g{token: 9, sent: 0, ack: ms(10), lastOK: 0, end: ms(100), released: true},
			g{token: 5, sent: ms(150), ack: ms(160), lastOK: ms(150), end: ms(200), released: true},
		), "before token"},
		{"overlap", build(
			g{token: 5, sent: 0, ack: ms(10), lastOK: 0, end: ms(100), released: true},
			g{token: 9, sent: ms(20), ack: ms(50), lastOK: ms(20), end: ms(200), released: true},
		), "overlap"},
		{"lapsed before its TTL", build(
			g{token: 5, sent: 0, ack: ms(10), lastOK: 0, end: ms(100), notFound: true},
			g{token: 9, sent: ms(300), ack: ms(400), lastOK: ms(300), end: ms(500), released: true},
		), "TTL"},
	}
	for _, tc := range cases {
		var got collect
		checkHistory(&got, tc.rec, ttl)
		all := strings.Join(got.errs, "\n")
		switch {
		case tc.want == "" && len(got.errs) > 0:
			t.Errorf("%s: a good history was refused: %s", tc.name, all)
		case tc.want != "" && !strings.Contains(all, tc.want):
			t.Errorf("%s: not caught (want %q): %q", tc.name, tc.want, all)
		}
		if tc.name == "overlap" && !strings.Contains(all, "NOT linearizable") {
			t.Errorf("overlap: porcupine did not refuse it: %q", all)
		}
	}
}

// endedByReason reads leasehold_leases_ended_total from a node's registry.
func endedByReason(t testing.TB, n *testcluster.Node) string {
	t.Helper()
	mfs, err := n.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != "leasehold_leases_ended_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				out = append(out, fmt.Sprintf("%s=%v", lp.GetValue(), m.GetCounter().GetValue()))
			}
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}
