package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// richState builds a state with leases (with metadata, progress, renewals
// and a recorded age), waiters on several resources, lock-delays, a
// multi-grant entry, and dedup records of every kind of answer.
func richState(t testing.TB) *harness {
	h := newHarness(t)
	a := acq("a", "x", "y")
	a.Metadata = map[string]string{"team": "core", "env": "prod"}
	a.LockDelay, a.MaxHold = 3*time.Second, time.Minute
	la := h.mustGrant(a)
	h.one(&Renew{RequestID: "renew-a", LeaseID: la.ID, SecretHash: secret("a"), Progress: "rows 1-10", Age: 5 * time.Second})
	h.one(&Renew{RequestID: "renew-bad", LeaseID: la.ID, SecretHash: secret("mallory")})
	// Three grants in one entry: tokens run ahead of the index.
	h.apply(acq("b", "z"), acq("c", "c1", "c2", "c3"), acq("", "anon"))
	d := acq("d", "blk1", "blk2")
	d.LockDelay = 4 * time.Second
	ld := h.mustGrant(d)
	h.mustQueue(wacq("w1", "x"))
	h.mustQueue(wacq("w2", "y", "q"))
	h.mustQueue(wacq("w3", "z"))
	h.mustQueue(wacq("w4", "blk1"))
	h.mustQueue(wacq("w5", "c1"))
	h.mustQueue(wacq("w6", "c2"))
	h.mustQueue(wacq("w7", "q"))
	h.one(&Expire{LeaseID: ld.ID})        // blk1, blk2 in lock-delay
	h.one(&WaitTimeout{Key: keyOf("w5")}) // record replaced by a timeout
	h.one(&Cancel{Key: keyOf("w6")})      // record replaced by a cancel
	h.one(acq("held", "z"))               // refused: held
	h.one(acq("bad", "x", "x"))           // refused: invalid
	h.one(&Release{RequestID: "rel-gone", LeaseID: 9999, SecretHash: secret("a")})
	e := h.mustGrant(acq("e", "e"))
	h.one(&Release{RequestID: "rel-e", LeaseID: e.ID, SecretHash: secret("e")})
	c := Counts{Leases: 4, Waiters: 5, Blocked: 2}
	if got := h.s.Counts(); got.Leases != c.Leases || got.Waiters != c.Waiters || got.Blocked != c.Blocked {
		t.Fatalf("rich state counts %+v, want %+v", got, c)
	}
	return h
}

// requireSameState compares two states field by field (not only their
// snapshots), so a field that Snapshot forgets is caught too.
func requireSameState(t testing.TB, a, b *State) {
	t.Helper()
	check := func(what string, x, y any) {
		t.Helper()
		if !reflect.DeepEqual(x, y) {
			t.Fatalf("restored state differs in %s:\n%#v\n%#v", what, x, y)
		}
	}
	check("cfg", a.cfg, b.cfg)
	check("lastIndex", a.lastIndex, b.lastIndex)
	check("lastToken", a.lastToken, b.lastToken)
	check("nextArrival", a.leases.nextArrival, b.leases.nextArrival)
	check("leases", a.leases.byID, b.leases.byID)
	check("holders", a.leases.holders, b.leases.holders)
	check("blocks", a.leases.blocks, b.leases.blocks)
	check("waiters", a.leases.waiters, b.leases.waiters)
	check("lines", a.leases.lines, b.leases.lines)
	live := func(s *State) []dedupRec {
		var out []dedupRec
		s.dedup.each(func(r *dedupRec) { out = append(out, *r) })
		return out
	}
	check("dedup", live(a), live(b))
}

func TestSnapshotRoundTrip(t *testing.T) {
	cases := []struct {
		name  string
		build func(t testing.TB) *harness
	}{
		{"empty", func(t testing.TB) *harness { return newHarness(t) }},
		{"rich", richState},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.build(t)
			snap := h.s.Snapshot()
			if !bytes.Equal(snap, h.s.Snapshot()) {
				t.Fatal("two snapshots of one state differ")
			}
			obs := &recorder{}
			r, err := Restore(snap, DefaultConfig(), obs)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(r.Snapshot(), snap) {
				t.Fatal("restored.Snapshot() differs from the snapshot it came from")
			}
			requireSameState(t, h.s, r)
			if r.LastIndex() != h.s.LastIndex() || r.LastToken() != h.s.LastToken() || r.Counts() != h.s.Counts() {
				t.Fatal("restored counters differ")
			}
			// The observer given to Restore hears the restored state's events.
			r.Apply(h.ix+1, &Batch{Time: h.now + 1, Cmds: []Command{acq("fresh", "fresh")}})
			if len(obs.ev) != 1 {
				t.Fatalf("restored observer heard %q", obs.ev)
			}
			r.SetObserver(nil)
			r.Apply(h.ix+2, &Batch{Time: h.now + 2, Cmds: []Command{acq("fresh2", "fresh2")}})
			if len(obs.ev) != 1 {
				t.Fatal("SetObserver(nil) did not detach the observer")
			}
		})
	}
}

// TestSnapshotThenApply applies the same further entries to a state and to
// its restored copy: every result, every event and every snapshot match.
func TestSnapshotThenApply(t *testing.T) {
	h := richState(t)
	obs := &recorder{}
	r, err := Restore(h.s.Snapshot(), DefaultConfig(), obs)
	if err != nil {
		t.Fatal(err)
	}
	h.obs.take()
	la, _ := h.s.Holder("x")
	lb, _ := h.s.Holder("z")
	ld := uint64(0)
	h.s.EachCountdown(func(c Countdown) {
		if u, ok := c.Fire.(*Unblock); ok {
			ld = u.Token
		}
	})
	entries := [][]Command{
		{&Renew{RequestID: "renew-a", LeaseID: la.ID, SecretHash: secret("a")}},   // retry: dup
		{&Renew{RequestID: "renew-bad", LeaseID: la.ID, SecretHash: secret("a")}}, // retry: dup refusal
		{acq("a", "x", "y"), acq("w5", "c1"), acq("w6", "c2"), acq("bad", "x", "x")},
		{&Release{RequestID: "rel-e", LeaseID: 1, SecretHash: secret("e")}},
		{&Renew{LeaseID: la.ID, SecretHash: secret("a"), Age: 58 * time.Second}}, // clipped by max hold
		{&Unblock{Resource: "blk1", Token: ld}},                                  // grants w4
		{&Expire{LeaseID: la.ID, RenewCount: 2}},                                 // blocks x, y
		{&Unblock{Resource: "x", Token: la.Token}, &Unblock{Resource: "y", Token: la.Token}},
		{&Cancel{Key: keyOf("w2")}, &WaitTimeout{Key: keyOf("w1")}},
		{&Release{RequestID: "rel-b", LeaseID: lb.ID, SecretHash: secret("b")}}, // grants w3
		{&Release{RequestID: "rel-b", LeaseID: lb.ID, SecretHash: secret("b")}}, // retry
		{acq("new1", "x", "q"), wacq("new2", "q"), acq("held", "z")},
		{&Cancel{Key: keyOf("w3")}}, // the grant raced the cancel
	}
	for i, cmds := range entries {
		ix, now := h.ix+uint64(i)+1, h.now+int64(i+1)*int64(time.Second)
		got1 := h.s.Apply(ix, &Batch{Time: now, Cmds: cmds})
		got2 := r.Apply(ix, &Batch{Time: now, Cmds: cmds})
		if !reflect.DeepEqual(got1, got2) {
			t.Fatalf("entry %d: results differ:\noriginal: %s\nrestored: %s", i, fmtResults(got1), fmtResults(got2))
		}
		if e1, e2 := h.obs.take(), obs.take(); !reflect.DeepEqual(e1, e2) {
			t.Fatalf("entry %d: events differ:\noriginal: %q\nrestored: %q", i, e1, e2)
		}
		if !bytes.Equal(h.s.Snapshot(), r.Snapshot()) {
			t.Fatalf("entry %d: snapshots differ", i)
		}
	}
	requireSameState(t, h.s, r)
}

func fmtResults(rs []Result) string {
	s := ""
	for _, r := range rs {
		s += fmt.Sprintf("[%s %v] ", summarize(r), r.Err)
	}
	return s
}

// randomLog makes a deterministic pseudo-random workload. It observes the
// first replica to learn grants, ends, lock-delays and waiters, so that
// most commands hit something live; every replica gets the same entries.
type randomLog struct {
	rng     *rand.Rand
	res     []string
	leases  []uint64          // every lease ever granted
	live    []uint64          // leases not yet ended, in grant order
	secrets map[uint64]string // lease -> secret name
	renews  map[uint64]uint64 // lease -> renew count
	blocks  map[string]uint64 // resource -> lock-delay token
	waiting []string          // queued request IDs, in queue order
	reqs    []Command         // commands with a request ID, for retries
	n       int
}

func newRandomLog(seed uint64) *randomLog {
	return &randomLog{
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		res:     []string{"a", "b", "c", "d", "e", "f"},
		secrets: map[uint64]string{},
		renews:  map[uint64]uint64{},
		blocks:  map[string]uint64{},
	}
}

// lease picks a lease (mostly a live one) and a secret name (mostly right).
func (g *randomLog) lease() (uint64, string) {
	var id uint64 = 1
	switch {
	case len(g.live) > 0 && g.rng.IntN(4) != 0:
		id = g.live[g.rng.IntN(len(g.live))]
	case len(g.leases) > 0:
		id = g.leases[g.rng.IntN(len(g.leases))]
	}
	name := g.secrets[id]
	if g.rng.IntN(5) == 0 {
		name = "wrong"
	}
	return id, name
}

func (g *randomLog) next() Command {
	g.n++
	id := fmt.Sprintf("q%d", g.n)
	switch k := g.rng.IntN(14); {
	case k < 4:
		n := 1 + g.rng.IntN(3)
		perm := g.rng.Perm(len(g.res))[:n]
		rs := make([]string, n)
		for i, p := range perm {
			rs[i] = g.res[p]
		}
		c := acq(id, rs...)
		if g.rng.IntN(2) == 0 {
			c.Wait = time.Minute
		}
		if g.rng.IntN(3) == 0 {
			c.LockDelay = time.Second
		}
		if g.rng.IntN(3) == 0 {
			c.MaxHold = 30 * time.Second
		}
		if g.rng.IntN(3) == 0 {
			c.Metadata = map[string]string{"n": id}
		}
		if g.rng.IntN(10) == 0 {
			c.TTL = 0 // invalid
		}
		g.reqs = append(g.reqs, c)
		return c
	case k < 6:
		l, name := g.lease()
		c := &Renew{LeaseID: l, SecretHash: secret(name), Age: time.Duration(g.rng.IntN(40)) * time.Second, Progress: id}
		if g.rng.IntN(2) == 0 {
			c.RequestID = id
			g.reqs = append(g.reqs, c)
		}
		return c
	case k < 8:
		l, name := g.lease()
		c := &Release{LeaseID: l, SecretHash: secret(name)}
		if g.rng.IntN(2) == 0 {
			c.RequestID = id
			g.reqs = append(g.reqs, c)
		}
		return c
	case k < 9:
		l, _ := g.lease()
		rc := g.renews[l]
		if g.rng.IntN(4) == 0 {
			rc++ // stale or future
		}
		return &Expire{LeaseID: l, RenewCount: rc}
	case k < 10:
		r := g.res[g.rng.IntN(len(g.res))]
		tok, ok := g.blocks[r]
		if !ok || g.rng.IntN(4) == 0 {
			tok, _ = g.lease()
		}
		return &Unblock{Resource: r, Token: tok}
	case k < 12:
		target := fmt.Sprintf("q%d", 1+g.rng.IntN(g.n))
		if len(g.waiting) > 0 && g.rng.IntN(4) != 0 {
			target = g.waiting[g.rng.IntN(len(g.waiting))]
		}
		if g.rng.IntN(2) == 0 {
			return &Cancel{Key: keyOf(target)}
		}
		return &WaitTimeout{Key: keyOf(target)}
	default:
		if len(g.reqs) == 0 {
			return &Unblock{Resource: "none"}
		}
		c := g.reqs[g.rng.IntN(len(g.reqs))]
		if g.rng.IntN(5) == 0 { // the same request ID for another kind
			switch c := c.(type) {
			case *Acquire:
				return &Renew{RequestID: c.RequestID, LeaseID: 1}
			case *Renew:
				return &Release{RequestID: c.RequestID, LeaseID: c.LeaseID, SecretHash: c.SecretHash}
			case *Release:
				return acq(c.RequestID, "a")
			}
		}
		return c
	}
}

func (g *randomLog) batch() []Command {
	cmds := make([]Command, 1+g.rng.IntN(4))
	for i := range cmds {
		cmds[i] = g.next()
	}
	return cmds
}

// learn notes renew counts from an entry's results.
func (g *randomLog) learn(out []Result) {
	for _, r := range out {
		if r.Lease != nil && r.Err == nil && !r.Dup {
			if _, live := g.renews[r.Lease.ID]; live {
				g.renews[r.Lease.ID] = r.Lease.RenewCount
			}
		}
	}
}

// randomLog is an Observer of the first replica.

func (g *randomLog) Granted(l *leasehold.Lease, key string) {
	// acq derives the secret from the bare request ID, not the key.
	requestID := showKey(key)
	if requestID == "" {
		requestID = "anon"
	}
	g.leases = append(g.leases, l.ID)
	g.live = append(g.live, l.ID)
	g.secrets[l.ID] = requestID
	g.renews[l.ID] = 0
}
func (g *randomLog) Renewed(*leasehold.Lease, time.Duration) {}
func (g *randomLog) Ended(l *leasehold.Lease, _ EndReason) {
	g.live = slices.DeleteFunc(g.live, func(id uint64) bool { return id == l.ID })
	delete(g.renews, l.ID)
}
func (g *randomLog) WaitEnded(key string, _ Result) {
	g.waiting = slices.DeleteFunc(g.waiting, func(w string) bool { return w == showKey(key) })
}
func (g *randomLog) Arm(c Countdown) {
	switch c.Key.Kind {
	case CountdownWait:
		g.waiting = append(g.waiting, showKey(c.Key.Name))
	case CountdownLockDelay:
		g.blocks[c.Key.Name] = c.Fire.(*Unblock).Token
	}
}
func (g *randomLog) Disarm(CountdownKey) {}

// TestDeterminism applies one log to two fresh states, and to a third
// restored from a snapshot halfway: results and snapshots are identical.
func TestDeterminism(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			g := newRandomLog(seed)
			cfg := Config{DedupWindow: 20 * time.Second, DedupMax: 50}
			s1, s2 := New(cfg, g), New(cfg, nil)
			var s3 *State
			const entries = 600
			for i := 1; i <= entries; i++ {
				cmds := g.batch()
				b := &Batch{Time: t0 + int64(i)*int64(time.Second), Cmds: cmds}
				ix := uint64(i * 2) // leave gaps, as raft's own entries do
				out1, out2 := s1.Apply(ix, b), s2.Apply(ix, b)
				if !reflect.DeepEqual(out1, out2) {
					t.Fatalf("entry %d: results differ: %s / %s", i, fmtResults(out1), fmtResults(out2))
				}
				if s3 != nil {
					if out3 := s3.Apply(ix, b); !reflect.DeepEqual(out1, out3) {
						t.Fatalf("entry %d: restored state's results differ: %s / %s", i, fmtResults(out1), fmtResults(out3))
					}
				}
				g.learn(out1)
				snap := s1.Snapshot()
				if !bytes.Equal(snap, s2.Snapshot()) {
					t.Fatalf("entry %d: snapshots of two replicas differ", i)
				}
				if s3 != nil && !bytes.Equal(snap, s3.Snapshot()) {
					t.Fatalf("entry %d: snapshot of the restored replica differs", i)
				}
				if i == entries/2 {
					var err error
					if s3, err = Restore(snap, cfg, nil); err != nil {
						t.Fatal(err)
					}
				}
			}
			if c := s1.Counts(); c.Leases+c.Waiters+c.Blocked == 0 {
				t.Logf("note: the workload ended with an empty state: %+v", c)
			}
		})
	}
}

func TestRestoreRejects(t *testing.T) {
	snap := richState(t).s.Snapshot()
	cases := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"magic only", []byte(snapMagic)},
		{"wrong magic", append([]byte("LHSNAQ"), snap[len(snapMagic):]...)},
		{"newer version", append(append([]byte(snapMagic), snapVersion+1), snap[len(snapMagic)+1:]...)},
		{"trailing byte", append(append([]byte(nil), snap...), 0)},
		{"huge lease count", append(append([]byte(snapMagic), snapVersion, 1, 1, 1), 0xff, 0xff, 0xff, 0xff, 0x0f)},
		{"a batch, not a snapshot", (&Batch{Time: 1, Cmds: []Command{acq("a", "x")}}).Encode(nil)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if s, err := Restore(tc.data, DefaultConfig(), nil); err == nil {
				t.Fatalf("Restore accepted it: %+v", s.Counts())
			}
		})
	}
	t.Run("every truncation", func(t *testing.T) {
		for n := range len(snap) {
			if _, err := Restore(snap[:n], DefaultConfig(), nil); err == nil {
				t.Fatalf("Restore accepted the first %d of %d bytes", n, len(snap))
			}
		}
	})
}

// TestSnapshotKeepsLeaseFields checks each public lease field survives.
func TestSnapshotKeepsLeaseFields(t *testing.T) {
	h := richState(t)
	r, err := Restore(h.s.Snapshot(), DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := h.s.Holder("x")
	got, ok := r.Lease(l.ID)
	if !ok || !reflect.DeepEqual(got, l) {
		t.Fatalf("lease after restore:\n%+v\nwant\n%+v", got, l)
	}
	if l.Progress != "rows 1-10" || l.RenewCount != 1 || l.Metadata["team"] != "core" || l.RenewedAt.IsZero() {
		t.Fatalf("rich state lacks the fields under test: %+v", l)
	}
	if r.HeldFor(l.ID) != 5*time.Second {
		t.Fatalf("HeldFor after restore = %v", r.HeldFor(l.ID))
	}
	for _, res := range []string{"blk1", "blk2"} {
		d1, ok1 := h.s.LockDelay(res)
		d2, ok2 := r.LockDelay(res)
		if !ok1 || d1 != d2 || ok1 != ok2 {
			t.Fatalf("lock-delay of %s: %v %v / %v %v", res, d1, ok1, d2, ok2)
		}
	}
	for _, res := range []string{"x", "y", "q", "z", "blk1", "c1"} {
		if a, b := h.s.Waiters(res), r.Waiters(res); !reflect.DeepEqual(a, b) {
			t.Fatalf("waiters of %s: %+v / %+v", res, a, b)
		}
	}
}

// snapLease is one lease for handMadeSnapshot.
type snapLease struct {
	id        uint64
	resources []string
}

// handMadeSnapshot encodes a snapshot directly, so a test can write states
// that Apply could never produce.
func handMadeSnapshot(lastToken, nextArrival uint64, leases []snapLease, waiters []*Acquire) []byte {
	e := encoder{}
	e.b = append(e.b, snapMagic...)
	e.byte1(snapVersion)
	e.uvarint(lastToken) // last index
	e.uvarint(lastToken)
	e.uvarint(nextArrival)
	e.uvarint(uint64(len(leases)))
	for _, l := range leases {
		encodeLease(&e, &leasehold.Lease{ID: l.id, Token: l.id, Resources: l.resources, TTL: time.Second})
		e.hash(secret("a"))
		e.varint(0)
		e.str("")
	}
	e.uvarint(0) // no lock-delays
	e.uvarint(uint64(len(waiters)))
	for i, w := range waiters {
		w.encode(&e)
		e.uvarint(uint64(i + 1))
		e.varint(t0)
	}
	e.uvarint(0) // no dedup records
	return e.b
}

// TestRestoreRejectsInconsistentState: Restore checks lengths, but not that
// the decoded state is one Apply could have made. Each case below restores
// today, and then breaks an invariant (or panics) on the next entries.
func TestRestoreRejectsInconsistentState(t *testing.T) {
	apply := func(s *State, ix uint64, cmds ...Command) []Result {
		return s.Apply(ix, &Batch{Time: t0, Cmds: cmds})
	}
	cases := []struct {
		name string
		snap []byte
		then func(s *State) string // what goes wrong after the restore
	}{
		{"two leases with one id", handMadeSnapshot(10, 0, []snapLease{{5, []string{"x"}}, {5, []string{"y"}}}, nil),
			func(s *State) string {
				apply(s, 11, &Release{LeaseID: 5, SecretHash: secret("a")})
				apply(s, 12, acq("b", "x")) // x's holder entry dangles
				return "no panic"
			}},
		{"two leases hold one resource", handMadeSnapshot(10, 0, []snapLease{{4, []string{"x"}}, {5, []string{"x"}}}, nil),
			func(s *State) string {
				_, ok4 := s.Lease(4)
				_, ok5 := s.Lease(5)
				return fmt.Sprintf("x is held by lease 4 (%v) and lease 5 (%v) at once", ok4, ok5)
			}},
		{"a lease token above the last token", handMadeSnapshot(3, 0, []snapLease{{7, []string{"x"}}}, nil),
			func(s *State) string {
				out := apply(s, 4, acq("a", "y"), acq("b", "z"), acq("c", "w"), acq("d", "v"))
				return fmt.Sprintf("token %d issued again; lease 7 now holds %v", out[3].Lease.Token, out[3].Lease.Resources)
			}},
		{"two waiters with one request ID", handMadeSnapshot(10, 2, []snapLease{{5, []string{"x"}}},
			[]*Acquire{wacq("w", "x"), wacq("w", "x")}),
			func(s *State) string {
				// A replica restored from this state's own snapshot sees one
				// waiter where this one queues two: they diverge.
				other, _ := Restore(s.Snapshot(), DefaultConfig(), nil)
				var grants [2]int
				for i, st := range []*State{s, other} {
					apply(st, 11, &Release{LeaseID: 5, SecretHash: secret("a")})
					apply(st, 12, &Release{LeaseID: 11, SecretHash: secret("w")})
					if _, ok := st.Holder("x"); ok {
						grants[i] = 2
					} else {
						grants[i] = 1
					}
				}
				return fmt.Sprintf("the restored state grants w %d times, a replica restored from its snapshot %d times", grants[0], grants[1])
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Restore(tc.snap, DefaultConfig(), nil)
			if err != nil {
				return
			}
			var what string
			func() {
				defer func() {
					if p := recover(); p != nil {
						what = fmt.Sprintf("the next entries panic: %v", p)
					}
				}()
				what = tc.then(s)
			}()
			t.Errorf("BUG: Restore accepted an inconsistent snapshot; then %s", what)
		})
	}
}
