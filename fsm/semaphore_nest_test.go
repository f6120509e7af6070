package fsm

import (
	"testing"

	"github.com/leasehold/leasehold/api/leasehold"
)

// A semaphore's name is never one of another semaphore's slots, in either
// order: semaphore "x#1" in use refuses a new semaphore "x" whose slot 1
// it would be, and semaphore "x" in use refuses a new semaphore "x#1"
// even while its slot 1 is free. Before, the first was granted, so "x#1"
// was at once a semaphore (queueing its own waiters, with slots x#1#1...)
// and a slot held by another semaphore's lease.
func TestSemaphoreNamesDoNotNest(t *testing.T) {
	s := New(DefaultConfig(), nil)
	if r := applyAt(s, 1, semAcq("a", "x#1", 2)); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := applyAt(s, 2, semAcq("b", "x", 2)); leasehold.CodeOf(r.Err) != leasehold.CodeConflict || r.Lease != nil {
		t.Fatalf("semaphore x while x#1 is a semaphore: %+v, want a conflict", r)
	}
	if _, ok := s.Holder("x#1"); ok {
		t.Fatal("x#1 is held as a slot beside being a semaphore")
	}

	s2 := New(DefaultConfig(), nil)
	a := applyAt(s2, 1, semAcq("a", "y", 3)) // y#1
	applyAt(s2, 2, semAcq("b", "y", 3))      // y#2
	if r := applyAt(s2, 3, &Release{LeaseID: a.Lease.ID, SecretHash: secret("a")}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := applyAt(s2, 4, semAcq("c", "y#1", 2)); leasehold.CodeOf(r.Err) != leasehold.CodeConflict || r.Lease != nil {
		t.Fatalf("semaphore y#1 while y is a semaphore (its slot 1 free): %+v, want a conflict", r)
	}
}
