package fsm

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// Unit tests of State.Apply. No raft: each test builds batches and applies
// them at chosen log indexes through the harness in helpers_test.go.

func TestAcquireAllOrNothing(t *testing.T) {
	cases := []struct {
		name string
		n    int   // resources asked for
		held []int // of those, indexes held by other leases first
		wait bool
	}{
		{name: "1 resource, free", n: 1},
		{name: "2 resources, free", n: 2},
		{name: "17 resources, free", n: 17},
		{name: "64 resources, free", n: leasehold.MaxResources},
		{name: "1 resource, held", n: 1, held: []int{0}},
		{name: "2 resources, second held", n: 2, held: []int{1}},
		{name: "64 resources, first held", n: 64, held: []int{0}},
		{name: "64 resources, last held", n: 64, held: []int{63}},
		{name: "64 resources, two in the middle held", n: 64, held: []int{20, 41}},
		{name: "5 resources, middle held, waiting", n: 5, held: []int{2}, wait: true},
		{name: "64 resources, last held, waiting", n: 64, held: []int{63}, wait: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			rs := resNames("r", tc.n)
			blockers := map[string]uint64{}
			for i, k := range tc.held {
				l := h.mustGrant(acq(fmt.Sprintf("blocker%d", i), rs[k]))
				blockers[rs[k]] = l.ID
			}
			h.obs.take()
			c := acq("want", rs...)
			if tc.wait {
				c.Wait = time.Minute
			}
			r := h.one(c)
			switch {
			case len(tc.held) == 0:
				if r.Err != nil || r.Lease == nil {
					t.Fatalf("got %s (%v), want a grant", summarize(r), r.Err)
				}
				if !slices.Equal(r.Lease.Resources, rs) {
					t.Fatalf("lease resources %v, want %v", r.Lease.Resources, rs)
				}
				if r.Remaining != c.TTL {
					t.Fatalf("Remaining = %v, want TTL %v", r.Remaining, c.TTL)
				}
				for _, res := range rs {
					if got := h.holder(res); got != r.Lease.ID {
						t.Fatalf("resource %s held by %d, want %d", res, got, r.Lease.ID)
					}
				}
				wantEvents(t, h.obs, fmt.Sprintf("granted lease=%d token=%d req=want res=%v", h.ix, h.ix, rs))
			case tc.wait:
				if !r.Queued || r.Err != nil || r.Lease != nil {
					t.Fatalf("got %s (%v), want queued", summarize(r), r.Err)
				}
				wantEvents(t, h.obs, "queued req=want wait=1m0s")
			default:
				wantCode(t, "acquire of a partly held set", r, leasehold.CodeHeld)
				wantEvents(t, h.obs)
			}
			if len(tc.held) > 0 {
				// Nothing of the set is held by the new request: the free ones
				// stay free, the held ones keep their holders.
				for _, res := range rs {
					if got, want := h.holder(res), blockers[res]; got != want {
						t.Fatalf("resource %s held by %d, want %d", res, got, want)
					}
				}
				if got := h.s.Counts().Leases; got != len(tc.held) {
					t.Fatalf("%d leases exist, want only the %d blockers", got, len(tc.held))
				}
			}
		})
	}
}

func TestTokenIsLogIndex(t *testing.T) {
	type grant struct {
		ix    uint64
		cmds  []Command
		wants []uint64 // token per command; 0 = not granted
	}
	cases := []struct {
		name  string
		steps []grant
	}{
		{
			name:  "single grant takes the entry's index",
			steps: []grant{{ix: 7, cmds: []Command{acq("a", "x")}, wants: []uint64{7}}},
		},
		{
			name: "sparse indexes",
			steps: []grant{
				{ix: 3, cmds: []Command{acq("a", "x")}, wants: []uint64{3}},
				{ix: 1000, cmds: []Command{acq("b", "y")}, wants: []uint64{1000}},
				{ix: 1001, cmds: []Command{acq("c", "z")}, wants: []uint64{1001}},
			},
		},
		{
			name: "several grants in one entry increase after the index",
			steps: []grant{
				{ix: 10, cmds: []Command{acq("a", "x"), acq("b", "y"), acq("c", "z")}, wants: []uint64{10, 11, 12}},
				// The next entry's index (11) was taken: strictly after 12.
				{ix: 11, cmds: []Command{acq("d", "w")}, wants: []uint64{13}},
				{ix: 12, cmds: []Command{acq("e", "v")}, wants: []uint64{14}},
				{ix: 20, cmds: []Command{acq("f", "u")}, wants: []uint64{20}},
			},
		},
		{
			name: "a refused acquire takes no token",
			steps: []grant{
				{ix: 5, cmds: []Command{acq("a", "x")}, wants: []uint64{5}},
				{ix: 30, cmds: []Command{acq("b", "y"), acq("c", "x"), acq("d", "z")}, wants: []uint64{30, 0, 31}},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			var last uint64
			for _, st := range tc.steps {
				out := h.applyAt(st.ix, st.cmds...)
				for i, want := range st.wants {
					r := out[i]
					if want == 0 {
						if r.Lease != nil {
							t.Fatalf("entry %d cmd %d: granted %d, want no grant", st.ix, i, r.Lease.Token)
						}
						continue
					}
					if r.Lease == nil {
						t.Fatalf("entry %d cmd %d: %s (%v), want token %d", st.ix, i, summarize(r), r.Err, want)
					}
					if r.Lease.Token != want || r.Lease.ID != want {
						t.Fatalf("entry %d cmd %d: token %d id %d, want %d", st.ix, i, r.Lease.Token, r.Lease.ID, want)
					}
					if r.Lease.Token <= last {
						t.Fatalf("token %d not after %d", r.Lease.Token, last)
					}
					last = r.Lease.Token
				}
			}
			if h.s.LastToken() != last {
				t.Fatalf("LastToken = %d, want %d", h.s.LastToken(), last)
			}
		})
	}

	t.Run("waiters granted by a release take the releasing entry's index", func(t *testing.T) {
		h := newHarness(t)
		l := h.mustGrant(acq("l", "a", "b"))
		h.mustQueue(wacq("w1", "a"))
		h.mustQueue(wacq("w2", "b"))
		h.obs.take()
		h.applyAt(50, release(l, "l"))
		if got := h.holder("a"); got != 50 {
			t.Fatalf("a held by %d, want the token 50", got)
		}
		if got := h.holder("b"); got != 51 {
			t.Fatalf("b held by %d, want the token 51", got)
		}
		wantEvents(t, h.obs,
			"ended lease=1 why=released",
			"granted lease=50 token=50 req=w1 res=[a]",
			"waitended req=w1 lease=50 remaining=10s",
			"granted lease=51 token=51 req=w2 res=[b]",
			"waitended req=w2 lease=51 remaining=10s")
	})
}

// TestTokensIncreasePerResource runs one resource through every way a
// lease can end and be re-granted, and checks each new holder's token.
func TestTokensIncreasePerResource(t *testing.T) {
	h := newHarness(t)
	var tokens []uint64
	seen := func(what string) *leasehold.Lease {
		t.Helper()
		l, ok := h.s.Holder("r")
		if !ok {
			t.Fatalf("%s: r has no holder", what)
		}
		if n := len(tokens); n > 0 && l.Token <= tokens[n-1] {
			t.Fatalf("%s: token %d is not after %v", what, l.Token, tokens)
		}
		tokens = append(tokens, l.Token)
		return &l
	}

	l := h.mustGrant(acq("g1", "r"))
	seen("first grant")
	h.one(release(l, "g1"))
	l = h.mustGrant(acq("g2", "r", "s"))
	seen("regrant after release")
	h.one(&Expire{LeaseID: l.ID})
	l = h.mustGrant(acq("g3", "r"))
	seen("regrant after expire")
	h.mustQueue(wacq("g4", "r"))
	h.one(release(l, "g3"))
	l = seen("hand-off to a waiter")
	h.one(&Cancel{Key: keyOf("g4")}) // the grant raced the cancel: released
	if _, ok := h.s.Holder("r"); ok {
		t.Fatal("cancel after the grant left r held")
	}
	c := acq("g5", "r")
	c.LockDelay = time.Second
	l = h.mustGrant(c)
	seen("regrant after a canceled grant")
	h.one(&Expire{LeaseID: l.ID})
	h.one(&Unblock{Resource: "r", Token: l.Token})

	// A snapshot in between must carry the token counter along.
	s2, err := Restore(h.s.Snapshot(), DefaultConfig(), h.obs)
	if err != nil {
		t.Fatal(err)
	}
	h.s = s2
	h.mustGrant(acq("g6", "r"))
	seen("regrant after lock-delay and a restore")
	// Several grants in one entry, then one at the next index.
	out := h.apply(acq("g7", "x"), acq("g8", "y"), acq("g9", "z"))
	h.one(release(out[0].Lease, "g7"))
	h.one(release(&leasehold.Lease{ID: tokens[len(tokens)-1]}, "g6"))
	h.mustGrant(acq("g10", "r", "x"))
	seen("regrant after a multi-grant entry")
}

func TestSecretChecks(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, h *harness)
	}{
		{"renew with the wrong secret", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("a", "x"))
			h.obs.take()
			before, _ := h.s.Lease(l.ID)
			r := h.one(&Renew{LeaseID: l.ID, SecretHash: secret("mallory"), Progress: "evil", Age: time.Hour})
			wantCode(t, "renew", r, leasehold.CodeNotHolder)
			after, _ := h.s.Lease(l.ID)
			if !reflect.DeepEqual(before, after) || h.s.HeldFor(l.ID) != 0 {
				t.Fatalf("lease changed by a wrong-secret renew:\n%+v\n%+v", before, after)
			}
			wantEvents(t, h.obs)
		}},
		{"release with the wrong secret", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("a", "x", "y"))
			h.obs.take()
			before := h.s.Snapshot()
			r := h.one(&Release{LeaseID: l.ID, SecretHash: secret("mallory")})
			wantCode(t, "release", r, leasehold.CodeNotHolder)
			if h.holder("x") != l.ID || h.holder("y") != l.ID {
				t.Fatal("wrong-secret release freed a resource")
			}
			// Only the header (last index) differs.
			h2, _ := Restore(before, DefaultConfig(), nil)
			h2.lastIndex = h.ix
			if !slices.Equal(h2.Snapshot(), h.s.Snapshot()) {
				t.Fatal("wrong-secret release changed the state")
			}
			wantEvents(t, h.obs)
		}},
		{"zero secret does not match", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("a", "x"))
			wantCode(t, "renew", h.one(&Renew{LeaseID: l.ID}), leasehold.CodeNotHolder)
			wantCode(t, "release", h.one(&Release{LeaseID: l.ID}), leasehold.CodeNotHolder)
		}},
		{"release of a released lease is not found", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("a", "x"))
			wantCode(t, "first release", h.one(release(l, "a")), leasehold.CodeUnknown)
			wantCode(t, "second release", h.one(release(l, "a")), leasehold.CodeNotFound)
			wantCode(t, "renew", h.one(renew(l, "a")), leasehold.CodeNotFound)
		}},
		{"release of an expired lease is not found", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("a", "x"))
			h.one(&Expire{LeaseID: l.ID})
			wantCode(t, "release", h.one(release(l, "a")), leasehold.CodeNotFound)
		}},
		{"lease that never existed is not found", func(t *testing.T, h *harness) {
			wantCode(t, "renew", h.one(&Renew{LeaseID: 99, SecretHash: secret("a")}), leasehold.CodeNotFound)
			wantCode(t, "release", h.one(&Release{LeaseID: 99, SecretHash: secret("a")}), leasehold.CodeNotFound)
		}},
		{"expired holder cannot touch the new holder's lease", func(t *testing.T, h *harness) {
			old := h.mustGrant(acq("old", "x"))
			h.one(&Expire{LeaseID: old.ID})
			cur := h.mustGrant(acq("new", "x"))
			h.obs.take()
			wantCode(t, "old secret releases new lease", h.one(&Release{LeaseID: cur.ID, SecretHash: secret("old")}), leasehold.CodeNotHolder)
			wantCode(t, "old secret renews new lease", h.one(&Renew{LeaseID: cur.ID, SecretHash: secret("old")}), leasehold.CodeNotHolder)
			wantCode(t, "old lease released", h.one(release(old, "old")), leasehold.CodeNotFound)
			wantCode(t, "old lease renewed", h.one(renew(old, "old")), leasehold.CodeNotFound)
			if got, _ := h.s.Lease(cur.ID); got.RenewCount != 0 || h.holder("x") != cur.ID {
				t.Fatalf("new holder's lease changed: %+v", got)
			}
			wantEvents(t, h.obs)
		}},
		{"right secret renews", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("a", "x"))
			r := h.one(&Renew{LeaseID: l.ID, SecretHash: secret("a"), Progress: "step 1"})
			wantCode(t, "renew", r, leasehold.CodeUnknown)
			if r.Lease.RenewCount != 1 || r.Lease.Progress != "step 1" || r.Remaining != 10*time.Second {
				t.Fatalf("renew result %+v remaining %v", r.Lease, r.Remaining)
			}
			if !r.Lease.RenewedAt.Equal(time.Unix(0, h.now)) {
				t.Fatalf("RenewedAt = %v, want the batch time", r.Lease.RenewedAt)
			}
			h.one(renew(l, "a")) // no progress: keeps the last note
			if got, _ := h.s.Lease(l.ID); got.RenewCount != 2 || got.Progress != "step 1" {
				t.Fatalf("after second renew: %+v", got)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newHarness(t)) })
	}
}

func TestExpire(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, h *harness)
	}{
		{"matching renew count ends the lease", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("a", "x", "y"))
			h.obs.take()
			r := h.one(&Expire{LeaseID: l.ID, RenewCount: 0})
			if r.Lease == nil || r.Lease.ID != l.ID || r.Err != nil {
				t.Fatalf("expire: %s", summarize(r))
			}
			if h.holder("x") != 0 || h.holder("y") != 0 || h.s.Counts().Leases != 0 {
				t.Fatal("expired lease still holds")
			}
			if _, blocked := h.s.LockDelay("x"); blocked {
				t.Fatal("expiry without lock-delay blocked the resource")
			}
			wantEvents(t, h.obs, fmt.Sprintf("ended lease=%d why=expired", l.ID))
		}},
		{"stale renew count is ignored", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("a", "x"))
			h.one(renew(l, "a"))
			h.obs.take()
			r := h.one(&Expire{LeaseID: l.ID, RenewCount: 0})
			if r != (Result{}) {
				t.Fatalf("stale expire: %s", summarize(r))
			}
			if h.holder("x") != l.ID {
				t.Fatal("stale expire ended the lease")
			}
			wantEvents(t, h.obs)
			if r := h.one(&Expire{LeaseID: l.ID, RenewCount: 1}); r.Lease == nil {
				t.Fatal("expire with the current renew count did nothing")
			}
		}},
		{"renew count from the future is ignored", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("a", "x"))
			if r := h.one(&Expire{LeaseID: l.ID, RenewCount: 5}); r != (Result{}) {
				t.Fatalf("expire: %s", summarize(r))
			}
			if h.holder("x") != l.ID {
				t.Fatal("lease ended")
			}
		}},
		{"expire of a gone lease is a no-op", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("a", "x"))
			h.one(release(l, "a"))
			h.obs.take()
			if r := h.one(&Expire{LeaseID: l.ID}); r != (Result{}) {
				t.Fatalf("expire: %s", summarize(r))
			}
			if r := h.one(&Expire{LeaseID: 12345}); r != (Result{}) {
				t.Fatalf("expire: %s", summarize(r))
			}
			wantEvents(t, h.obs)
		}},
		{"expiry hands the resources to a waiter in the same entry", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("a", "x"))
			h.mustQueue(wacq("w", "x"))
			h.obs.take()
			h.one(&Expire{LeaseID: l.ID})
			if h.holder("x") != h.ix {
				t.Fatalf("x held by %d, want the waiter's lease %d", h.holder("x"), h.ix)
			}
			wantEvents(t, h.obs,
				fmt.Sprintf("ended lease=%d why=expired", l.ID),
				fmt.Sprintf("granted lease=%d token=%d req=w res=[x]", h.ix, h.ix),
				fmt.Sprintf("waitended req=w lease=%d remaining=10s", h.ix))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newHarness(t)) })
	}
}

func TestLockDelay(t *testing.T) {
	delayed := func(id string, rs ...string) *Acquire {
		c := acq(id, rs...)
		c.LockDelay = 5 * time.Second
		return c
	}
	cases := []struct {
		name string
		run  func(t *testing.T, h *harness)
	}{
		{"expiry blocks until a matching unblock", func(t *testing.T, h *harness) {
			l := h.mustGrant(delayed("a", "x", "y"))
			h.obs.take()
			h.one(&Expire{LeaseID: l.ID})
			wantEvents(t, h.obs,
				fmt.Sprintf("ended lease=%d why=expired", l.ID),
				fmt.Sprintf("blocked res=x token=%d delay=5s", l.Token),
				fmt.Sprintf("blocked res=y token=%d delay=5s", l.Token))
			for _, res := range []string{"x", "y"} {
				if d, ok := h.s.LockDelay(res); !ok || d != 5*time.Second {
					t.Fatalf("LockDelay(%s) = %v, %v", res, d, ok)
				}
			}
			wantCode(t, "acquire in lock-delay", h.one(acq("b", "x")), leasehold.CodeHeld)
			h.one(&Unblock{Resource: "x", Token: l.Token + 1}) // wrong token
			wantCode(t, "acquire after a wrong unblock", h.one(acq("c", "x")), leasehold.CodeHeld)
			h.one(&Unblock{Resource: "x", Token: l.Token})
			if _, ok := h.s.LockDelay("x"); ok {
				t.Fatal("x still blocked after a matching unblock")
			}
			h.mustGrant(acq("d", "x"))
			wantCode(t, "y still blocked", h.one(acq("e", "y")), leasehold.CodeHeld)
			if h.s.Counts().Blocked != 1 {
				t.Fatalf("Counts().Blocked = %d, want 1", h.s.Counts().Blocked)
			}
		}},
		{"clean release does not block", func(t *testing.T, h *harness) {
			l := h.mustGrant(delayed("a", "x"))
			h.one(release(l, "a"))
			if _, ok := h.s.LockDelay("x"); ok {
				t.Fatal("release blocked the resource")
			}
			h.mustGrant(acq("b", "x"))
		}},
		{"canceled grant does not block", func(t *testing.T, h *harness) {
			h.mustGrant(delayed("a", "x"))
			h.one(&Cancel{Key: keyOf("a")})
			if _, ok := h.s.LockDelay("x"); ok {
				t.Fatal("cancel blocked the resource")
			}
			h.mustGrant(acq("b", "x"))
		}},
		{"a waiter is granted by the unblock", func(t *testing.T, h *harness) {
			l := h.mustGrant(delayed("a", "x"))
			h.mustQueue(wacq("w", "x"))
			h.one(&Expire{LeaseID: l.ID})
			if h.holder("x") != 0 || len(h.queue("x")) != 1 {
				t.Fatal("waiter granted during the lock-delay")
			}
			h.obs.take()
			h.one(&Unblock{Resource: "x", Token: l.Token})
			if h.holder("x") != h.ix {
				t.Fatalf("x held by %d, want the unblock's index %d", h.holder("x"), h.ix)
			}
			wantEvents(t, h.obs,
				fmt.Sprintf("granted lease=%d token=%d req=w res=[x]", h.ix, h.ix),
				fmt.Sprintf("waitended req=w lease=%d remaining=10s", h.ix))
		}},
		{"a waiter for several blocked resources needs every unblock", func(t *testing.T, h *harness) {
			l := h.mustGrant(delayed("a", "x", "y"))
			h.mustQueue(wacq("w", "y", "x"))
			h.one(&Expire{LeaseID: l.ID})
			h.one(&Unblock{Resource: "y", Token: l.Token})
			if h.holder("y") != 0 || h.holder("x") != 0 {
				t.Fatal("waiter granted while x is blocked")
			}
			h.one(&Unblock{Resource: "x", Token: l.Token})
			if h.holder("x") != h.ix || h.holder("y") != h.ix {
				t.Fatal("waiter not granted after both unblocks")
			}
		}},
		{"a stale unblock cannot end a newer lock-delay", func(t *testing.T, h *harness) {
			l1 := h.mustGrant(delayed("a", "x"))
			h.one(&Expire{LeaseID: l1.ID})
			h.one(&Unblock{Resource: "x", Token: l1.Token})
			l2 := h.mustGrant(delayed("b", "x"))
			h.one(&Expire{LeaseID: l2.ID})
			h.one(&Unblock{Resource: "x", Token: l1.Token}) // replayed, stale
			if _, ok := h.s.LockDelay("x"); !ok {
				t.Fatal("stale unblock ended the newer lock-delay")
			}
			h.one(&Unblock{Resource: "x", Token: l2.Token})
			h.mustGrant(acq("c", "x"))
		}},
		{"unblock of a free resource is a no-op", func(t *testing.T, h *harness) {
			if r := h.one(&Unblock{Resource: "nope", Token: 1}); r != (Result{}) {
				t.Fatalf("unblock: %s", summarize(r))
			}
			wantEvents(t, h.obs)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newHarness(t)) })
	}
}

func TestMaxHold(t *testing.T) {
	const ttl, maxHold = 10 * time.Second, 30 * time.Second
	cases := []struct {
		name    string
		maxHold time.Duration
		ages    []time.Duration // earlier successful renews
		age     time.Duration
		code    leasehold.Code
		want    time.Duration // Remaining
	}{
		{name: "young lease gets a full ttl", maxHold: maxHold, age: 0, want: ttl},
		{name: "ttl fits exactly", maxHold: maxHold, age: 20 * time.Second, want: ttl},
		{name: "clipped to max hold", maxHold: maxHold, age: 25 * time.Second, want: 5 * time.Second},
		{name: "one millisecond left", maxHold: maxHold, age: maxHold - time.Millisecond, want: time.Millisecond},
		{name: "age equal to max hold is refused", maxHold: maxHold, age: maxHold, code: leasehold.CodeLimit},
		{name: "age past max hold is refused", maxHold: maxHold, age: time.Hour, code: leasehold.CodeLimit},
		{name: "no max hold: any age renews for a full ttl", maxHold: 0, age: 1000 * time.Hour, want: ttl},
		{name: "age never goes backwards", maxHold: maxHold, ages: []time.Duration{25 * time.Second}, age: 5 * time.Second, want: 5 * time.Second},
		{name: "recorded age clips a smaller stamped age", maxHold: maxHold, ages: []time.Duration{29 * time.Second}, age: 0, want: time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			c := acq("a", "x")
			c.TTL, c.MaxHold = ttl, tc.maxHold
			l := h.mustGrant(c)
			for _, age := range tc.ages {
				r := h.one(&Renew{LeaseID: l.ID, SecretHash: secret("a"), Age: age})
				wantCode(t, "earlier renew", r, leasehold.CodeUnknown)
			}
			before, _ := h.s.Lease(l.ID)
			heldBefore := h.s.HeldFor(l.ID)
			h.obs.take()
			r := h.one(&Renew{LeaseID: l.ID, SecretHash: secret("a"), Age: tc.age, Progress: "p"})
			wantCode(t, "renew", r, tc.code)
			if tc.code != leasehold.CodeUnknown {
				after, _ := h.s.Lease(l.ID)
				if !reflect.DeepEqual(before, after) || h.s.HeldFor(l.ID) != heldBefore {
					t.Fatalf("refused renew changed the lease: %+v -> %+v", before, after)
				}
				wantEvents(t, h.obs)
				if h.holder("x") != l.ID {
					t.Fatal("refused renew ended the lease; only Expire may")
				}
				return
			}
			if r.Remaining != tc.want {
				t.Fatalf("Remaining = %v, want %v", r.Remaining, tc.want)
			}
			wantEvents(t, h.obs, fmt.Sprintf("renewed lease=%d count=%d remaining=%v", l.ID, len(tc.ages)+1, tc.want))
			if got, want := h.s.HeldFor(l.ID), max(tc.age, slices.Max(append(tc.ages, 0))); got != want {
				t.Fatalf("HeldFor = %v, want %v", got, want)
			}
		})
	}
}

func TestWaiters(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, h *harness)
	}{
		{"FIFO by arrival", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("l", "x"))
			for _, id := range []string{"w1", "w2", "w3"} {
				h.mustQueue(wacq(id, "x"))
			}
			if q := h.queue("x"); !slices.Equal(q, []string{"w1", "w2", "w3"}) {
				t.Fatalf("queue %v", q)
			}
			if h.s.Counts().Waiters != 3 {
				t.Fatalf("Counts().Waiters = %d", h.s.Counts().Waiters)
			}
			cur, name := l, "l"
			for i, id := range []string{"w1", "w2", "w3"} {
				h.one(release(cur, name))
				got, ok := h.s.Holder("x")
				if !ok || got.ID != h.ix {
					t.Fatalf("after release %d: x held by %+v, want %s's lease %d", i, got, id, h.ix)
				}
				if q := h.queue("x"); len(q) != 2-i {
					t.Fatalf("queue after %s granted: %v", id, q)
				}
				cur, name = &got, id
			}
		}},
		{"{A,B} and {B,A} waiters are both granted", func(t *testing.T, h *harness) {
			la := h.mustGrant(acq("la", "A"))
			lb := h.mustGrant(acq("lb", "B"))
			h.mustQueue(wacq("w1", "A", "B"))
			h.mustQueue(wacq("w2", "B", "A"))
			h.one(release(la, "la"))
			if h.holder("A") != 0 {
				t.Fatal("A granted while w1 still lacks B")
			}
			h.one(release(lb, "lb"))
			w1 := h.ix
			if h.holder("A") != w1 || h.holder("B") != w1 {
				t.Fatal("w1 not granted when both were free")
			}
			h.one(&Release{LeaseID: w1, SecretHash: secret("w1")})
			if h.holder("A") != h.ix || h.holder("B") != h.ix {
				t.Fatal("w2 not granted after w1 released")
			}
			if h.s.Counts().Waiters != 0 {
				t.Fatal("waiters left over")
			}
		}},
		{"a later waiter never jumps an earlier overlapping one", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("l", "a"))
			h.mustQueue(wacq("w1", "a", "b")) // b is free but reserved for w1
			h.mustQueue(wacq("w2", "b"))
			wantCode(t, "non-waiting acquire of b", h.one(acq("x", "b")), leasehold.CodeHeld)
			if h.holder("b") != 0 {
				t.Fatal("b granted past w1")
			}
			h.one(release(l, "l"))
			w1 := h.ix
			if h.holder("a") != w1 || h.holder("b") != w1 {
				t.Fatal("w1 not granted")
			}
			if q := h.queue("b"); !slices.Equal(q, []string{"w2"}) {
				t.Fatalf("queue b = %v", q)
			}
			h.one(&Release{LeaseID: w1, SecretHash: secret("w1")})
			if h.holder("b") != h.ix || h.holder("a") != 0 {
				t.Fatal("w2 not granted after w1")
			}
		}},
		{"a later waiter waits even when its own resources free first", func(t *testing.T, h *harness) {
			la := h.mustGrant(acq("la", "a"))
			lb := h.mustGrant(acq("lb", "b"))
			h.mustQueue(wacq("w1", "a", "b"))
			h.mustQueue(wacq("w2", "b"))
			h.one(release(lb, "lb"))
			if h.holder("b") != 0 {
				t.Fatal("b granted to w2 ahead of w1")
			}
			h.one(release(la, "la"))
			if h.holder("a") != h.ix || h.holder("b") != h.ix {
				t.Fatal("w1 not granted")
			}
		}},
		{"a freed waiter never jumps an earlier one still blocked elsewhere", func(t *testing.T, h *harness) {
			la := h.mustGrant(acq("la", "a"))
			h.mustGrant(acq("lc", "c"))
			h.mustQueue(wacq("w1", "b", "c")) // b free, c held
			h.mustQueue(wacq("w2", "a", "b")) // behind w1 on b
			h.one(release(la, "la"))          // a free: w2 heads a's queue, but not b's
			if h.holder("a") != 0 || h.holder("b") != 0 {
				t.Fatal("w2 jumped w1 on b")
			}
			if q := h.queue("b"); !slices.Equal(q, []string{"w1", "w2"}) {
				t.Fatalf("queue b = %v", q)
			}
		}},
		{"a waiter disjoint from earlier waiters is granted independently", func(t *testing.T, h *harness) {
			h.mustGrant(acq("la", "a"))
			lc := h.mustGrant(acq("lc", "c"))
			h.mustQueue(wacq("w1", "a"))
			h.mustQueue(wacq("w2", "c", "d"))
			h.one(release(lc, "lc"))
			if h.holder("c") != h.ix || h.holder("d") != h.ix {
				t.Fatal("w2 not granted")
			}
			if q := h.queue("a"); !slices.Equal(q, []string{"w1"}) {
				t.Fatalf("w1 no longer waits: %v", q)
			}
			h.mustGrant(acq("z", "z")) // free and unwanted: granted at once
		}},
		{"one release grants several waiters in arrival order", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("l", "a", "b", "c"))
			h.mustQueue(wacq("w1", "c"))
			h.mustQueue(wacq("w2", "a"))
			h.mustQueue(wacq("w3", "b", "a")) // behind w2 on a
			h.mustQueue(wacq("w4", "b"))      // behind w3 on b
			h.obs.take()
			h.applyAt(100, release(l, "l"))
			wantEvents(t, h.obs,
				fmt.Sprintf("ended lease=%d why=released", l.ID),
				"granted lease=100 token=100 req=w1 res=[c]",
				"waitended req=w1 lease=100 remaining=10s",
				"granted lease=101 token=101 req=w2 res=[a]",
				"waitended req=w2 lease=101 remaining=10s")
			if q := h.queue("b"); !slices.Equal(q, []string{"w3", "w4"}) {
				t.Fatalf("queue b = %v", q)
			}
			if h.holder("b") != 0 {
				t.Fatal("b granted past w3")
			}
		}},
		{"a retried waiting acquire does not queue twice", func(t *testing.T, h *harness) {
			h.mustGrant(acq("l", "a"))
			h.mustQueue(wacq("w", "a"))
			h.obs.take()
			r := h.one(wacq("w", "a"))
			if !r.Queued || !r.Dup {
				t.Fatalf("retry: %s", summarize(r))
			}
			if q := h.queue("a"); len(q) != 1 {
				t.Fatalf("queue = %v", q)
			}
			wantEvents(t, h.obs)
		}},
		{"a waiting acquire that can be granted at once is not queued", func(t *testing.T, h *harness) {
			r := h.one(wacq("w", "a"))
			if r.Lease == nil || r.Queued {
				t.Fatalf("got %s", summarize(r))
			}
			wantEvents(t, h.obs, fmt.Sprintf("granted lease=%d token=%d req=w res=[a]", h.ix, h.ix))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newHarness(t)) })
	}
}

func TestCancelAndWaitTimeout(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, h *harness)
	}{
		{"wait timeout removes the waiter and lets the next move up", func(t *testing.T, h *harness) {
			h.mustGrant(acq("l", "a"))
			h.mustQueue(wacq("w1", "a", "b"))
			h.mustQueue(wacq("w2", "b"))
			h.obs.take()
			r := h.one(&WaitTimeout{Key: keyOf("w1")})
			wantCode(t, "wait timeout", r, leasehold.CodeWaitTimeout)
			wantEvents(t, h.obs,
				"waitended req=w1 err=wait_timeout",
				fmt.Sprintf("granted lease=%d token=%d req=w2 res=[b]", h.ix, h.ix),
				fmt.Sprintf("waitended req=w2 lease=%d remaining=10s", h.ix))
			if q := h.queue("a"); len(q) != 0 {
				t.Fatalf("queue a = %v", q)
			}
			wantCode(t, "retried acquire", h.one(wacq("w1", "a", "b")), leasehold.CodeWaitTimeout)
		}},
		{"cancel removes the waiter and lets the next move up", func(t *testing.T, h *harness) {
			h.mustGrant(acq("l", "a"))
			h.mustQueue(wacq("w1", "a", "b"))
			h.mustQueue(wacq("w2", "b"))
			h.obs.take()
			r := h.one(&Cancel{Key: keyOf("w1")})
			wantCode(t, "cancel", r, leasehold.CodeCanceled)
			wantEvents(t, h.obs,
				"waitended req=w1 err=canceled",
				fmt.Sprintf("granted lease=%d token=%d req=w2 res=[b]", h.ix, h.ix),
				fmt.Sprintf("waitended req=w2 lease=%d remaining=10s", h.ix))
			r = h.one(wacq("w1", "a", "b"))
			wantCode(t, "retried acquire", r, leasehold.CodeCanceled)
			if !r.Dup {
				t.Fatal("retry after cancel not answered from dedup")
			}
		}},
		{"removing a middle waiter keeps the order", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("l", "a"))
			for _, id := range []string{"w1", "w2", "w3", "w4"} {
				h.mustQueue(wacq(id, "a"))
			}
			h.one(&Cancel{Key: keyOf("w2")})
			h.one(&WaitTimeout{Key: keyOf("w3")})
			if q := h.queue("a"); !slices.Equal(q, []string{"w1", "w4"}) {
				t.Fatalf("queue = %v", q)
			}
			if h.holder("a") != l.ID {
				t.Fatal("holder changed")
			}
		}},
		{"cancel racing a grant releases the grant", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("l", "a"))
			h.mustQueue(wacq("w1", "a"))
			h.mustQueue(wacq("w2", "a"))
			h.obs.take()
			// The release grants w1; the cancel in the same entry loses the race.
			out := h.apply(release(l, "l"), &Cancel{Key: keyOf("w1")})
			w1, w2 := h.ix, h.ix+1
			if out[1].Lease == nil || out[1].Lease.ID != w1 || out[1].Err != nil {
				t.Fatalf("cancel: %s, want w1's lease %d released", summarize(out[1]), w1)
			}
			wantEvents(t, h.obs,
				fmt.Sprintf("ended lease=%d why=released", l.ID),
				fmt.Sprintf("granted lease=%d token=%d req=w1 res=[a]", w1, w1),
				fmt.Sprintf("waitended req=w1 lease=%d remaining=10s", w1),
				fmt.Sprintf("ended lease=%d why=canceled", w1),
				fmt.Sprintf("granted lease=%d token=%d req=w2 res=[a]", w2, w2),
				fmt.Sprintf("waitended req=w2 lease=%d remaining=10s", w2))
			if h.holder("a") != w2 {
				t.Fatalf("a held by %d, want w2's lease %d", h.holder("a"), w2)
			}
			if r := h.one(&Cancel{Key: keyOf("w1")}); r != (Result{}) {
				t.Fatalf("second cancel: %s", summarize(r))
			}
			if h.holder("a") != w2 {
				t.Fatal("second cancel touched w2's lease")
			}
		}},
		{"cancel racing an immediate grant releases it", func(t *testing.T, h *harness) {
			l := h.mustGrant(wacq("w", "a"))
			r := h.one(&Cancel{Key: keyOf("w")})
			if r.Lease == nil || r.Lease.ID != l.ID {
				t.Fatalf("cancel: %s", summarize(r))
			}
			if h.holder("a") != 0 {
				t.Fatal("grant not released")
			}
		}},
		{"cancel after a retry was answered with the grant leaves the lease", func(t *testing.T, h *harness) {
			first := wacq("w", "a")
			first.Attempt = "1"
			l := h.mustGrant(first)
			// A retry on another connection gets the lease ...
			retry := wacq("w", "a")
			retry.Attempt = "2"
			if r := h.one(retry); !r.Dup || r.Lease == nil || r.Lease.ID != l.ID || r.ForeignSecret {
				t.Fatalf("retry: %s", summarize(r))
			}
			// ... so the first connection's late withdrawal must not end it.
			if r := h.one(&Cancel{Key: keyOf("w"), Attempt: "1"}); r != (Result{}) {
				t.Fatalf("cancel: %s", summarize(r))
			}
			if h.holder("a") != l.ID {
				t.Fatal("the claimed grant was released")
			}
		}},
		{"cancel of an unknown or empty request is a no-op", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("", "a"))
			h.obs.take()
			for _, id := range []string{"", "nobody"} {
				if r := h.one(&Cancel{Key: keyOf(id)}); r != (Result{}) {
					t.Fatalf("cancel %q: %s", id, summarize(r))
				}
				if r := h.one(&WaitTimeout{Key: keyOf(id)}); r != (Result{}) {
					t.Fatalf("wait timeout %q: %s", id, summarize(r))
				}
			}
			if h.holder("a") != l.ID {
				t.Fatal("holder changed")
			}
			wantEvents(t, h.obs)
		}},
		{"cancel of a refused acquire is a no-op", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("l", "a"))
			wantCode(t, "acquire", h.one(acq("x", "a")), leasehold.CodeHeld)
			if r := h.one(&Cancel{Key: keyOf("x")}); r != (Result{}) {
				t.Fatalf("cancel: %s", summarize(r))
			}
			if h.holder("a") != l.ID {
				t.Fatal("holder changed")
			}
		}},
		{"cancel names a request ID used by a renew: no-op", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("l", "a"))
			h.one(&Renew{RequestID: "r", LeaseID: l.ID, SecretHash: secret("l")})
			if r := h.one(&Cancel{Key: keyOf("r")}); r != (Result{}) {
				t.Fatalf("cancel: %s", summarize(r))
			}
			if h.holder("a") != l.ID {
				t.Fatal("holder changed")
			}
		}},
		{"wait timeout after the grant keeps the lease", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("l", "a"))
			h.mustQueue(wacq("w", "a"))
			h.apply(release(l, "l"))
			w := h.ix
			if r := h.one(&WaitTimeout{Key: keyOf("w")}); r != (Result{}) {
				t.Fatalf("wait timeout: %s", summarize(r))
			}
			if h.holder("a") != w {
				t.Fatal("wait timeout after the grant released it")
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newHarness(t)) })
	}
}

func TestDedup(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, h *harness)
	}{
		{"retried acquire returns the first grant", func(t *testing.T, h *harness) {
			first := h.one(acq("a", "x"))
			h.obs.take()
			r := h.one(acq("a", "x"))
			if !r.Dup || r.Lease == nil || r.Lease.ID != first.Lease.ID || r.Remaining != first.Remaining {
				t.Fatalf("retry: %s, want dup of %s", summarize(r), summarize(first))
			}
			if h.s.Counts().Leases != 1 {
				t.Fatal("retry granted a second lease")
			}
			wantEvents(t, h.obs)
		}},
		{"retried acquire after its lease ended is told the lease is gone", func(t *testing.T, h *harness) {
			first := h.one(acq("a", "x"))
			h.one(release(first.Lease, "a"))
			h.obs.take()
			r := h.one(acq("a", "x"))
			wantCode(t, "retry", r, leasehold.CodeNotFound)
			if !r.Dup {
				t.Fatalf("retry: %s", summarize(r))
			}
			if h.holder("x") != 0 {
				t.Fatal("retry acquired again")
			}
			wantEvents(t, h.obs)
		}},
		{"retried refused acquire returns the first refusal", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("l", "x"))
			wantCode(t, "first", h.one(acq("a", "x")), leasehold.CodeHeld)
			h.one(release(l, "l"))
			r := h.one(acq("a", "x"))
			wantCode(t, "retry", r, leasehold.CodeHeld)
			if !r.Dup || h.holder("x") != 0 {
				t.Fatalf("retry acted: %s", summarize(r))
			}
		}},
		{"retried renew renews once", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("a", "x"))
			rn := &Renew{RequestID: "r1", LeaseID: l.ID, SecretHash: secret("a"), Progress: "p1"}
			first := h.one(rn)
			h.obs.take()
			r := h.one(rn)
			if !r.Dup || r.Lease == nil || r.Lease.RenewCount != 1 || r.Remaining != first.Remaining {
				t.Fatalf("retry: %s %+v", summarize(r), r.Lease)
			}
			if got, _ := h.s.Lease(l.ID); got.RenewCount != 1 {
				t.Fatalf("RenewCount = %d after a retried renew", got.RenewCount)
			}
			wantEvents(t, h.obs)
		}},
		{"only a lease's last renewal is remembered, on the lease", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("a", "x"))
			dedups := h.s.Counts().Dedup
			r1 := &Renew{RequestID: "r1", LeaseID: l.ID, SecretHash: secret("a")}
			r2 := &Renew{RequestID: "r2", LeaseID: l.ID, SecretHash: secret("a")}
			h.one(r1)
			if r := h.one(r1); !r.Dup || r.Lease.RenewCount != 1 {
				t.Fatalf("retry of the last renewal: %s count %d", summarize(r), r.Lease.RenewCount)
			}
			h.one(r2)
			// A retry of an older renewal renews again: harmless, since its
			// sender counts its deadline from before its first send.
			if r := h.one(r1); r.Dup || r.Lease.RenewCount != 3 {
				t.Fatalf("retry of an older renewal: %s count %d", summarize(r), r.Lease.RenewCount)
			}
			if n := h.s.Counts().Dedup; n != dedups {
				t.Fatalf("renewals added %d dedup records", n-dedups)
			}
			// The wrong secret never gets the remembered answer, and a
			// failed renewal is not remembered (it did nothing).
			wantCode(t, "wrong secret", h.one(&Renew{RequestID: "r1", LeaseID: l.ID, SecretHash: secret("b")}), leasehold.CodeNotHolder)
			h.one(release(l, "a"))
			wantCode(t, "retry after the lease ended", h.one(r1), leasehold.CodeNotFound)
		}},
		{"retried release returns the first answer and acts once", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("a", "x"))
			h.mustQueue(wacq("w", "x"))
			rel := &Release{RequestID: "rel", LeaseID: l.ID, SecretHash: secret("a")}
			first := h.one(rel)
			w := h.ix
			h.obs.take()
			r := h.one(rel)
			if !r.Dup || r.Err != nil || r.Lease == nil || r.Lease.ID != first.Lease.ID {
				t.Fatalf("retry: %s (%v)", summarize(r), r.Err)
			}
			if h.holder("x") != w {
				t.Fatal("retried release touched the waiter's grant")
			}
			wantEvents(t, h.obs)
		}},
		{"request ID reused for a different kind is invalid", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("k", "x"))
			h.obs.take()
			wantCode(t, "renew", h.one(&Renew{RequestID: "k", LeaseID: l.ID, SecretHash: secret("k")}), leasehold.CodeInvalid)
			wantCode(t, "release", h.one(&Release{RequestID: "k", LeaseID: l.ID, SecretHash: secret("k")}), leasehold.CodeInvalid)
			if got, _ := h.s.Lease(l.ID); got.RenewCount != 0 || h.holder("x") != l.ID {
				t.Fatal("the misused request ID acted")
			}
			wantEvents(t, h.obs)
			r := h.one(acq("k", "x"))
			if !r.Dup || r.Lease == nil || r.Lease.ID != l.ID {
				t.Fatalf("the acquire's own record was lost: %s", summarize(r))
			}
			h.one(&Release{RequestID: "rl", LeaseID: l.ID + 100, SecretHash: secret("k")})
			sameScope := acq("rl", "y") // the same caller and secret as the release
			sameScope.SecretHash = secret("k")
			wantCode(t, "acquire with a release's ID", h.one(sameScope), leasehold.CodeInvalid)
			wantCode(t, "renew with a release's ID", h.one(&Renew{RequestID: "rl", LeaseID: l.ID, SecretHash: secret("k")}), leasehold.CodeInvalid)
			if h.holder("y") != 0 || h.holder("x") != l.ID {
				t.Fatal("the misused request ID acted")
			}
		}},
		{"an empty request ID is never deduplicated", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("a", "x"))
			h.one(renew(l, "a"))
			r := h.one(renew(l, "a"))
			if r.Dup || r.Lease.RenewCount != 2 {
				t.Fatalf("second renew: %s count %d", summarize(r), r.Lease.RenewCount)
			}
			if h.s.Counts().Dedup != 1 {
				t.Fatalf("Counts().Dedup = %d, want 1", h.s.Counts().Dedup)
			}
		}},
		{"retried waiting acquire returns the outcome of its wait", func(t *testing.T, h *harness) {
			l := h.mustGrant(acq("l", "x"))
			h.mustQueue(wacq("w", "x"))
			h.one(release(l, "l"))
			w := h.ix
			r := h.one(wacq("w", "x"))
			if !r.Dup || r.Lease == nil || r.Lease.ID != w {
				t.Fatalf("retry: %s", summarize(r))
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newHarness(t)) })
	}
}

func TestDedupEviction(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		dt   time.Duration
		run  func(t *testing.T, h *harness)
	}{
		{"window evicts by batch time", Config{DedupWindow: time.Minute, DedupMax: 100}, 30 * time.Second,
			func(t *testing.T, h *harness) {
				l := h.mustGrant(acq("a", "x"))
				rel := &Release{RequestID: "r", LeaseID: l.ID, SecretHash: secret("b")} // not the holder
				h.one(rel)                                                              // at T
				if r := h.one(rel); !r.Dup {
					t.Fatal("retry 30s later is not a dup")
				}
				// At T+60s the record is exactly one window old: gone.
				if r := h.one(rel); r.Dup {
					t.Fatalf("retry one window later: %s; want a fresh answer", summarize(r))
				}
				h.apply()
				h.apply()
				if n := h.s.Counts().Dedup; n != 0 {
					t.Fatalf("Counts().Dedup = %d after two windows, want 0", n)
				}
			}},
		{"DedupMax evicts the oldest", Config{DedupWindow: time.Hour, DedupMax: 3}, time.Second,
			func(t *testing.T, h *harness) {
				l := h.mustGrant(acq("", "x"))
				var rels []*Release
				for i := range 4 { // not the holder: each records its answer
					rels = append(rels, &Release{RequestID: fmt.Sprintf("r%d", i), LeaseID: l.ID, SecretHash: secret("b")})
				}
				h.apply(rels[0], rels[1], rels[2], rels[3])
				if n := h.s.Counts().Dedup; n != 3 {
					t.Fatalf("Counts().Dedup = %d, want 3", n)
				}
				if r := h.one(rels[3]); !r.Dup {
					t.Fatal("newest record evicted")
				}
				if r := h.one(rels[0]); r.Dup {
					t.Fatalf("oldest retry: %s; want it evicted and answered afresh", summarize(r))
				}
			}},
		{"a waiter's record replaced at its grant counts as new", Config{DedupWindow: time.Hour, DedupMax: 2}, time.Second,
			func(t *testing.T, h *harness) {
				l := h.mustGrant(acq("", "x"))
				h.mustQueue(wacq("w", "x"))                                               // record w
				h.one(&Renew{RequestID: "r1", LeaseID: l.ID, SecretHash: secret("anon")}) // record r1
				h.one(release(l, "anon"))                                                 // w granted: its record moves behind r1
				h.one(&Release{RequestID: "r2", LeaseID: 999})                            // record r2: evicts r1, not w
				if r := h.one(wacq("w", "x")); !r.Dup || r.Lease == nil {
					t.Fatalf("w: %s; want its grant from dedup", summarize(r))
				}
			}},
		{"a waiter outlives its dedup record", Config{DedupWindow: time.Minute, DedupMax: 100}, 2 * time.Minute,
			func(t *testing.T, h *harness) {
				l := h.mustGrant(acq("l", "x"))
				h.mustQueue(wacq("w", "x"))
				h.apply() // evicts w's queued record
				h.dt = time.Second
				if n := h.s.Counts().Dedup; n != 0 {
					t.Fatalf("Counts().Dedup = %d, want 0", n)
				}
				r := h.one(wacq("w", "x"))
				if !r.Queued || !r.Dup {
					t.Fatalf("retry while waiting: %s", summarize(r))
				}
				if q := h.queue("x"); len(q) != 1 {
					t.Fatalf("queue = %v", q)
				}
				h.one(release(l, "l"))
				if r := h.one(wacq("w", "x")); !r.Dup || r.Lease == nil {
					t.Fatalf("retry after grant: %s", summarize(r))
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarnessCfg(t, tc.cfg)
			h.dt = tc.dt
			tc.run(t, h)
		})
	}
}

func TestAcquireValidation(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(c *Acquire)
		valid bool
	}{
		{name: "ttl zero", edit: func(c *Acquire) { c.TTL = 0 }},
		{name: "ttl negative", edit: func(c *Acquire) { c.TTL = -time.Second }},
		{name: "ttl below minimum", edit: func(c *Acquire) { c.TTL = leasehold.MinTTL - 1 }},
		{name: "ttl above maximum", edit: func(c *Acquire) { c.TTL = leasehold.MaxTTL + 1 }},
		{name: "no resources", edit: func(c *Acquire) { c.Resources = nil }},
		{name: "65 resources", edit: func(c *Acquire) { c.Resources = resNames("r", 65) }},
		{name: "resource named twice", edit: func(c *Acquire) { c.Resources = []string{"a", "b", "a"} }},
		{name: "empty resource name", edit: func(c *Acquire) { c.Resources = []string{"a", ""} }},
		{name: "resource name too long", edit: func(c *Acquire) { c.Resources = []string{strings.Repeat("r", leasehold.MaxResourceLen+1)} }},
		{name: "resource name with a control character", edit: func(c *Acquire) { c.Resources = []string{"a\nb"} }},
		{name: "resource name not UTF-8", edit: func(c *Acquire) { c.Resources = []string{"a\xffb"} }},
		{name: "negative wait", edit: func(c *Acquire) { c.Wait = -1 }},
		{name: "wait above maximum", edit: func(c *Acquire) { c.Wait = leasehold.MaxWait + 1 }},
		{name: "wait without request ID", edit: func(c *Acquire) { c.Wait = time.Second; c.RequestID = "" }},
		{name: "negative lock-delay", edit: func(c *Acquire) { c.LockDelay = -1 }},
		{name: "lock-delay above maximum", edit: func(c *Acquire) { c.LockDelay = leasehold.MaxLockDelay + 1 }},
		{name: "max_hold below ttl", edit: func(c *Acquire) { c.MaxHold = c.TTL - 1 }},
		{name: "max_hold negative", edit: func(c *Acquire) { c.MaxHold = -1 }},
		{name: "max_hold above maximum", edit: func(c *Acquire) { c.MaxHold = leasehold.MaxMaxHold + 1 }},

		{name: "ttl at minimum", edit: func(c *Acquire) { c.TTL = leasehold.MinTTL }, valid: true},
		{name: "ttl at maximum", edit: func(c *Acquire) { c.TTL = leasehold.MaxTTL }, valid: true},
		{name: "64 resources", edit: func(c *Acquire) { c.Resources = resNames("r", 64) }, valid: true},
		{name: "wait at maximum", edit: func(c *Acquire) { c.Wait = leasehold.MaxWait }, valid: true},
		{name: "lock-delay at maximum", edit: func(c *Acquire) { c.LockDelay = leasehold.MaxLockDelay }, valid: true},
		{name: "max_hold equal to ttl", edit: func(c *Acquire) { c.MaxHold = c.TTL }, valid: true},
		{name: "max_hold at maximum", edit: func(c *Acquire) { c.MaxHold = leasehold.MaxMaxHold }, valid: true},
		{name: "no request ID without wait", edit: func(c *Acquire) { c.RequestID = "" }, valid: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.mustGrant(acq("busy", "busy")) // so that a waiting acquire could queue
			h.obs.take()
			c := acq("req", "a")
			tc.edit(c)
			if c.Wait > 0 && len(c.Resources) > 0 {
				c.Resources = append(c.Resources, "busy")
			}
			r := h.one(c)
			if tc.valid {
				if r.Err != nil {
					t.Fatalf("refused a valid acquire: %v", r.Err)
				}
				return
			}
			wantCode(t, "acquire", r, leasehold.CodeInvalid)
			if n := h.s.Counts(); n.Leases != 1 || n.Waiters != 0 {
				t.Fatalf("an invalid acquire changed the state: %+v", n)
			}
			wantEvents(t, h.obs)
			if c.RequestID != "" {
				if r := h.one(c); !r.Dup || leasehold.CodeOf(r.Err) != leasehold.CodeInvalid {
					t.Fatalf("retry: %s", summarize(r))
				}
			}
		})
	}
}

// TestFieldLimitsInStateMachine checks the promise in leasehold.go:
// "Limits enforced at the API edge and again in the state machine."
// Owner, operation, metadata, request ID and progress are stored in every
// replica and snapshot, so the state machine must refuse oversized ones too.
func TestFieldLimitsInStateMachine(t *testing.T) {
	big := func(n int) string { return strings.Repeat("x", n) }
	cases := []struct {
		name string
		cmd  func(l *leasehold.Lease) Command
	}{
		{"owner too long", func(*leasehold.Lease) Command {
			c := acq("a", "r")
			c.Owner = big(leasehold.MaxOwnerLen + 1)
			return c
		}},
		{"owner with a control character", func(*leasehold.Lease) Command {
			c := acq("a", "r")
			c.Owner = "bad\x00owner"
			return c
		}},
		{"operation too long", func(*leasehold.Lease) Command {
			c := acq("a", "r")
			c.Operation = big(leasehold.MaxOperationLen + 1)
			return c
		}},
		{"metadata too large", func(*leasehold.Lease) Command {
			c := acq("a", "r")
			c.Metadata = map[string]string{"k": big(leasehold.MaxMetadataBytes)}
			return c
		}},
		{"acquire request ID too long", func(*leasehold.Lease) Command {
			return acq(big(leasehold.MaxRequestIDLen+1), "r")
		}},
		{"renew progress too long", func(l *leasehold.Lease) Command {
			return &Renew{LeaseID: l.ID, SecretHash: secret("held"), Progress: big(leasehold.MaxProgressLen + 1)}
		}},
		{"renew request ID too long", func(l *leasehold.Lease) Command {
			return &Renew{RequestID: big(leasehold.MaxRequestIDLen + 1), LeaseID: l.ID, SecretHash: secret("held")}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			l := h.mustGrant(acq("held", "held"))
			r := h.one(tc.cmd(l))
			if leasehold.CodeOf(r.Err) != leasehold.CodeInvalid {
				t.Errorf("BUG: the state machine accepted it: got %s, want code invalid", summarize(r))
			}
		})
	}
}

// TestObserverEventOrder follows one story through every kind of event and
// checks the whole sequence the observer hears.
func TestObserverEventOrder(t *testing.T) {
	h := newHarness(t)
	c := acq("a", "x", "y")
	c.LockDelay = 2 * time.Second
	h.apply(c)                                                                         // 1
	h.apply(wacq("w1", "x"))                                                           // 2
	h.apply(wacq("w2", "y", "z"))                                                      // 3
	h.apply(acq("b", "z"))                                                             // 4: z is reserved for w2
	h.apply(&Renew{LeaseID: 1, SecretHash: secret("a"), Progress: "half"})             // 5
	h.apply(&Expire{LeaseID: 1, RenewCount: 0})                                        // 6: stale
	h.apply(&Expire{LeaseID: 1, RenewCount: 1})                                        // 7
	h.apply(&Unblock{Resource: "y", Token: 1}, &Unblock{Resource: "x", Token: 1})      // 8
	h.apply(&Release{LeaseID: 8, SecretHash: secret("w1")}, &Cancel{Key: keyOf("w1")}) // 9
	h.apply(&WaitTimeout{Key: keyOf("w2")})                                            // 10
	h.apply(&Release{LeaseID: 8, SecretHash: secret("w2")})                            // 11
	wantEvents(t, h.obs,
		"granted lease=1 token=1 req=a res=[x y]",
		"queued req=w1 wait=1m0s",
		"queued req=w2 wait=1m0s",
		"renewed lease=1 count=1 remaining=10s",
		"ended lease=1 why=expired",
		"blocked res=x token=1 delay=2s",
		"blocked res=y token=1 delay=2s",
		"granted lease=8 token=8 req=w2 res=[y z]",
		"waitended req=w2 lease=8 remaining=10s",
		"granted lease=9 token=9 req=w1 res=[x]",
		"waitended req=w1 lease=9 remaining=10s",
		"ended lease=9 why=canceled",
		"ended lease=8 why=released",
	)
	if n := h.s.Counts(); n != (Counts{Dedup: 4}) {
		t.Fatalf("Counts() = %+v", n)
	}
}

func TestQueries(t *testing.T) {
	h := newHarness(t)
	c := acq("a", "jobs/1", "other")
	c.Metadata = map[string]string{"k": "v"}
	a := h.mustGrant(c)
	b := h.mustGrant(acq("b", "jobs/2"))
	h.mustGrant(acq("c", "misc"))
	h.mustQueue(wacq("w", "jobs/2"))

	ids := func(ls []leasehold.Lease) []uint64 {
		var out []uint64
		for _, l := range ls {
			out = append(out, l.ID)
		}
		return out
	}
	if got := ids(h.s.Leases(0, 10, "jobs/")); !slices.Equal(got, []uint64{a.ID, b.ID}) {
		t.Fatalf("Leases(jobs/) = %v", got)
	}
	if got := ids(h.s.Leases(a.ID, 10, "")); !slices.Equal(got, []uint64{b.ID, 3}) {
		t.Fatalf("Leases(after a) = %v", got)
	}
	if got := ids(h.s.Leases(0, 1, "")); !slices.Equal(got, []uint64{a.ID}) {
		t.Fatalf("Leases(limit 1) = %v", got)
	}
	ws := h.s.Waiters("jobs/2")
	if len(ws) != 1 || ws[0].RequestID != "w" || ws[0].Wait != time.Minute || !ws[0].QueuedAt.Equal(time.Unix(0, h.now)) {
		t.Fatalf("Waiters = %+v", ws)
	}
	n := 0
	h.s.EachLease(func(l *leasehold.Lease, _ time.Duration) { n++ })
	h.s.EachCountdown(func(c Countdown) {
		if w, ok := c.Fire.(*WaitTimeout); ok && (w.Key != keyOf("w") || c.Key != waitKey(w.Key) || c.After != time.Minute) {
			t.Fatalf("EachCountdown: waiter %q %v", w.Key, c.After)
		}
	})
	if n != 3 {
		t.Fatalf("EachLease visited %d", n)
	}
	if _, ok := h.s.Lease(999); ok {
		t.Fatal("Lease(999) found")
	}
	if l, _ := h.s.Lease(a.ID); l.Metadata["k"] != "v" || l.AcquiredAt.UnixNano() != t0+int64(time.Second) {
		t.Fatalf("Lease(a) = %+v", l)
	}
}
