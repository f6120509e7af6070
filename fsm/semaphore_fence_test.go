package fsm

import (
	"strings"
	"testing"

	"github.com/leasehold/leasehold/api/leasehold"
)

// A fence on a semaphore's name (never held: its slots are) is refused as
// stale, with a message that says to fence the slot instead of the bare
// "no lease holds the resource".
func TestFenceOnASemaphoreNameSaysFenceTheSlot(t *testing.T) {
	s := New(DefaultConfig(), nil)
	a := applyAt(s, 1, semAcq("a", "pool", 2))
	err := s.CheckFence("pool", a.Lease.Token)
	if leasehold.CodeOf(err) != leasehold.CodeStaleToken || !strings.Contains(err.Error(), "slot") || !strings.Contains(err.Error(), "pool#1") {
		t.Fatalf("fence on the semaphore's name: %v, want stale naming the slot", err)
	}
	if err := s.CheckFence("pool#1", a.Lease.Token); err != nil {
		t.Fatalf("fence on the slot: %v", err)
	}
}

// A forced release naming a semaphore (not one of its slots) is refused
// with not_found that says to name the slot.
func TestForceReleaseOfASemaphoreNameSaysNameTheSlot(t *testing.T) {
	s := New(DefaultConfig(), nil)
	a := applyAt(s, 1, semAcq("a", "pool", 2))
	r := applyAt(s, 2, &ForceRelease{Resource: "pool", LeaseID: a.Lease.ID, Actor: "admin", Reason: "stuck"})
	if leasehold.CodeOf(r.Err) != leasehold.CodeNotFound || !strings.Contains(r.Err.Error(), "pool#1") {
		t.Fatalf("forced release of the semaphore's name: %+v, want not found naming the slots", r)
	}
	if r := applyAt(s, 3, &ForceRelease{Resource: "pool#1", LeaseID: a.Lease.ID, Actor: "admin", Reason: "stuck"}); r.Err != nil {
		t.Fatalf("forced release of the slot: %v", r.Err)
	}
}
