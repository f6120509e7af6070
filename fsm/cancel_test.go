package fsm

import (
	"testing"
	"time"
)

// A Cancel comes from one attempt whose caller went away; it must never
// undo what a retry of the same request (another attempt) was given.
func TestCancelIsScopedToItsAttempt(t *testing.T) {
	acq := func(attempt string, wait time.Duration) *Acquire {
		return &Acquire{RequestID: "r", Attempt: attempt, Resources: []string{"x"}, TTL: time.Second, Wait: wait}
	}
	t.Run("a retry's fresh grant survives the first attempt's cancel", func(t *testing.T) {
		s, ix := kvTestState()
		// Attempt A never reached the log; its retry B did and was granted.
		if r := applyOne(s, ix, acq("B", 0)); r.Lease == nil {
			t.Fatalf("grant: %+v", r)
		}
		if r := applyOne(s, ix, &Cancel{Key: acq("", 0).Key(), Attempt: "A"}); r != (Result{}) {
			t.Fatalf("cancel from A: %+v", r)
		}
		if _, held := s.Holder("x"); !held {
			t.Fatal("A's cancel released B's grant")
		}
		if r := applyOne(s, ix, &Cancel{Key: acq("", 0).Key(), Attempt: "B"}); r.Lease == nil {
			t.Fatal("B's own cancel did not release its grant")
		}
	})
	t.Run("a waiter a retry re-attached to stays queued", func(t *testing.T) {
		s, ix := kvTestState()
		applyOne(s, ix, &Acquire{RequestID: "h", Resources: []string{"x"}, TTL: time.Second})
		if r := applyOne(s, ix, acq("A", time.Minute)); !r.Queued {
			t.Fatalf("queue: %+v", r)
		}
		if r := applyOne(s, ix, acq("B", time.Minute)); !r.Queued || !r.Dup {
			t.Fatalf("retry: %+v", r)
		}
		if r := applyOne(s, ix, &Cancel{Key: acq("", 0).Key(), Attempt: "A"}); r != (Result{}) {
			t.Fatalf("cancel after the retry re-attached: %+v", r)
		}
		if len(s.Waiters("x")) != 1 {
			t.Fatal("the re-attached waiter was removed")
		}
		// The retry owns the place now: when its own caller goes away,
		// its Cancel withdraws it.
		if r := applyOne(s, ix, &Cancel{Key: acq("", 0).Key(), Attempt: "B"}); r.Err == nil {
			t.Fatalf("cancel from the retry that took the place over: %+v", r)
		}
		if len(s.Waiters("x")) != 0 {
			t.Fatal("the retry's own cancel left the waiter queued")
		}
	})
	t.Run("a grant a retry took over is released only by the retry's cancel", func(t *testing.T) {
		s, ix := kvTestState()
		if r := applyOne(s, ix, acq("A", 0)); r.Lease == nil {
			t.Fatalf("grant: %+v", r)
		}
		if r := applyOne(s, ix, acq("B", 0)); r.Lease == nil || !r.Dup {
			t.Fatalf("retry: %+v", r)
		}
		if r := applyOne(s, ix, &Cancel{Key: acq("", 0).Key(), Attempt: "A"}); r != (Result{}) {
			t.Fatalf("cancel from A after B took the grant over: %+v", r)
		}
		if r := applyOne(s, ix, &Cancel{Key: acq("", 0).Key(), Attempt: "B"}); r.Lease == nil {
			t.Fatal("B's cancel did not release the grant it took over")
		}
	})
}
