package fsm

import (
	"strings"
	"testing"

	"github.com/leasehold/leasehold"
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
