package fsm

import "testing"

// GrantOf finds the grant a waiting acquire got from the line (the answer
// a retry would get, and the attempt that owns it) only while that lease
// holds, and nothing while the acquire still waits.
func TestGrantOfFindsOnlyALiveGrant(t *testing.T) {
	h := newHarness(t)
	first := h.mustGrant(acq("holder", "r"))
	w := wacq("waiter", "r")
	w.Attempt = "a1"
	h.mustQueue(w)
	if _, _, ok := h.s.GrantOf(keyOf("waiter")); ok {
		t.Fatal("a waiter still in line reported granted")
	}
	h.one(release(first, "holder"))
	r, attempt, ok := h.s.GrantOf(keyOf("waiter"))
	if !ok || r.Lease == nil || r.Lease.Owner != "owner-waiter" || r.Lease.Token <= first.Token || !r.Dup || attempt != "a1" {
		t.Fatalf("after the hand-off: %+v attempt %q ok %v; want the waiter's lease, Dup, attempt a1", r, attempt, ok)
	}
	if r.Remaining != w.TTL {
		t.Errorf("remaining %v, want the TTL %v the grant answered with", r.Remaining, w.TTL)
	}
	h.one(release(r.Lease, "waiter"))
	if _, _, ok := h.s.GrantOf(keyOf("waiter")); ok {
		t.Fatal("a released grant reported as held")
	}
}
