package fsm

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// semAcq is acq as a semaphore acquire of name with limit n.
func semAcq(id, name string, n int) *SemAcquire {
	return &SemAcquire{Acquire: *acq(id, name), Limit: n}
}

func applyAt(s *State, ix uint64, c Command) Result {
	return s.Apply(ix, &Batch{Time: t0 + int64(ix)*int64(time.Second), Cmds: []Command{c}})[0]
}

// Up to the limit, holders get the lowest free slot, each with its own
// lease and token; the next one waits, and a release hands its slot to the
// first waiter.
func TestSemaphoreGrantsSlotsAndQueues(t *testing.T) {
	s := New(DefaultConfig(), nil)
	a := applyAt(s, 1, semAcq("a", "pool", 2))
	b := applyAt(s, 2, semAcq("b", "pool", 2))
	if a.Lease == nil || b.Lease == nil {
		t.Fatalf("two acquires of a 2-slot semaphore: %v, %v", a.Err, b.Err)
	}
	if a.Lease.Slot() != "pool#1" || b.Lease.Slot() != "pool#2" || a.Lease.Semaphore != "pool" || a.Lease.Limit != 2 {
		t.Fatalf("slots %q and %q (semaphore %q, limit %d), want pool#1 and pool#2", a.Lease.Slot(), b.Lease.Slot(), a.Lease.Semaphore, a.Lease.Limit)
	}
	if r := applyAt(s, 3, semAcq("c", "pool", 2)); !(leasehold.CodeOf(r.Err) == leasehold.CodeHeld) {
		t.Fatalf("a third acquire without a wait: %+v, want held", r)
	}
	c, d := semAcq("c2", "pool", 2), semAcq("d", "pool", 2)
	c.Wait, d.Wait = time.Minute, time.Minute
	if r := applyAt(s, 4, c); !r.Queued {
		t.Fatalf("a third acquire with a wait: %+v, want queued", r)
	}
	applyAt(s, 5, d)
	applyAt(s, 6, &Release{LeaseID: a.Lease.ID, SecretHash: secret("a")})
	got, ok := s.Holder("pool#1")
	if !ok || got.Owner != "owner-c2" || got.Token != 6 {
		t.Fatalf("pool#1 after the release: %+v (held %v), want the first waiter with token 6", got, ok)
	}
	if w := s.Waiters("pool"); len(w) != 1 || w[0].Owner != "owner-d" {
		t.Fatalf("waiters of pool: %+v, want d only", w)
	}
}

// A name is a lock or a semaphore of one limit, never a mix: each mix is
// refused with CodeConflict, naming the conflict.
func TestSemaphoreRefusesMixedKinds(t *testing.T) {
	s := New(DefaultConfig(), nil)
	applyAt(s, 1, semAcq("a", "pool", 3))
	applyAt(s, 2, acq("l", "lock"))
	applyAt(s, 3, semAcq("f1", "full", 1))
	fw := semAcq("f2", "full", 1)
	fw.Wait = time.Minute
	if r := applyAt(s, 4, fw); !r.Queued {
		t.Fatalf("a waiter on a full semaphore: %+v", r)
	}
	for _, tc := range []struct {
		name string
		c    Command
	}{
		{"a lock on a semaphore", acq("x1", "pool")},
		{"a lock on a slot", acq("x2", "pool#2")},
		{"another limit", semAcq("x3", "pool", 4)},
		{"a semaphore on a lock", semAcq("x4", "lock", 2)},
		{"a campaign on a semaphore", &Campaign{Acquire: *acq("x5", "pool")}},
		{"a campaign on a semaphore with waiters", &Campaign{Acquire: *acq("x6", "full")}},
	} {
		r := applyAt(s, 10, tc.c)
		if !(leasehold.CodeOf(r.Err) == leasehold.CodeConflict) {
			t.Errorf("%s: %+v, want a conflict", tc.name, r)
		}
	}
	s2 := New(DefaultConfig(), nil)
	applyAt(s2, 1, acq("l", "q#2"))
	if r := applyAt(s2, 2, semAcq("s", "q", 3)); !(leasehold.CodeOf(r.Err) == leasehold.CodeConflict) {
		t.Errorf("a semaphore whose slot is held as a lock: %+v, want a conflict", r)
	}
}

// A semaphore acquire names one semaphore and a limit in range.
func TestSemaphoreValidation(t *testing.T) {
	s := New(DefaultConfig(), nil)
	two := semAcq("a", "pool", 2)
	two.Resources = []string{"pool", "other"}
	for name, c := range map[string]*SemAcquire{
		"two resources": two,
		"limit too big": semAcq("b", "pool", leasehold.MaxSemaphoreLimit+1),
	} {
		if r := applyAt(s, 1, c); !(leasehold.CodeOf(r.Err) == leasehold.CodeInvalid) {
			t.Errorf("%s: %+v, want invalid", name, r)
		}
	}
}

// An expired slot with a lock-delay stays closed until unblocked, and the
// waiter then gets that slot; once nobody holds or awaits the name, it may
// become a lock again.
func TestSemaphoreLockDelayAndForgetting(t *testing.T) {
	s := New(DefaultConfig(), nil)
	a := semAcq("a", "pool", 1)
	a.LockDelay = time.Second
	l := applyAt(s, 1, a).Lease
	w := semAcq("w", "pool", 1)
	w.Wait = time.Minute
	applyAt(s, 2, w)
	applyAt(s, 3, &Expire{LeaseID: l.ID})
	if _, held := s.Holder("pool#1"); held {
		t.Fatal("the slot was granted during its lock-delay")
	}
	applyAt(s, 4, &Unblock{Resource: "pool#1", Token: l.Token})
	got, held := s.Holder("pool#1")
	if !held || got.Owner != "owner-w" {
		t.Fatalf("after the lock-delay: %+v, want the waiter", got)
	}
	applyAt(s, 5, &Release{LeaseID: got.ID, SecretHash: secret("w")})
	if r := applyAt(s, 6, acq("lock", "pool")); r.Lease == nil {
		t.Fatalf("a lock on a name no longer used as a semaphore: %v", r.Err)
	}
}

// A retried semaphore acquire gets its first answer (the same lease and
// slot), and one that reuses the request ID with another limit is refused.
func TestSemaphoreRetry(t *testing.T) {
	s := New(DefaultConfig(), nil)
	first := applyAt(s, 1, semAcq("a", "pool", 2))
	again := applyAt(s, 2, semAcq("a", "pool", 2))
	if again.Lease == nil || !again.Dup || again.Lease.ID != first.Lease.ID || again.Lease.Slot() != "pool#1" {
		t.Fatalf("a retry: %+v, want lease %d on pool#1 again", again, first.Lease.ID)
	}
	if r := applyAt(s, 3, semAcq("a", "pool", 3)); r.Err == nil || r.Lease != nil {
		t.Fatalf("the request ID reused with another limit: %+v, want refused", r)
	}
	if l, _ := s.Holder("pool#2"); l.ID != 0 {
		t.Fatalf("a retry took a second slot: %+v", l)
	}
}

// Fencing is on the slot: two holders fence their own slots at once, and
// a holder whose slot passed to a waiter is refused there, while the
// other slot's holder is not.
func TestSemaphoreFencesTheSlot(t *testing.T) {
	s := New(DefaultConfig(), nil)
	a := applyAt(s, 1, semAcq("a", "pool", 2)).Lease
	b := applyAt(s, 2, semAcq("b", "pool", 2)).Lease
	for _, l := range []*leasehold.Lease{a, b} {
		if err := s.CheckFence(l.Slot(), l.Token); err != nil {
			t.Fatalf("holder of %s: %v", l.Slot(), err)
		}
	}
	if err := s.CheckFence("pool", a.Token); leasehold.CodeOf(err) != leasehold.CodeStaleToken {
		t.Fatalf("a token checked against the semaphore's name, not its slot: %v", err)
	}
	w := semAcq("c", "pool", 2)
	w.Wait = time.Minute
	applyAt(s, 3, w)
	applyAt(s, 4, &Expire{LeaseID: a.ID})
	c, _ := s.Holder(a.Slot())
	if c.Owner != "owner-c" || c.Token <= a.Token {
		t.Fatalf("%s after the expiry: %+v", a.Slot(), c)
	}
	if err := s.CheckFence(a.Slot(), a.Token); leasehold.CodeOf(err) != leasehold.CodeStaleToken {
		t.Fatalf("the expired holder's token on its old slot: %v, want stale", err)
	}
	if err := s.CheckFence(b.Slot(), b.Token); err != nil {
		t.Fatalf("the other slot's holder: %v", err)
	}
}
