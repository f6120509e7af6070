package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// A semaphore of 2 on a real node: two holders get slots #1 and #2 with
// their own tokens, a third waits and gets the slot the first gives back
// with a larger token; Get shows the limit, the slots and the waiter; a
// lock on the name and another limit are refused as conflicts.
func TestSemaphoreHoldersSlotsAndWaiters(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := nodeClient(t, n)
	a := mustAcquire(t, c, []string{"sem/pool"}, client.Semaphore(2), client.TTL(30*time.Second))
	b := mustAcquire(t, c, []string{"sem/pool"}, client.Semaphore(2), client.TTL(30*time.Second))
	if a.Slot() != "sem/pool#1" || b.Slot() != "sem/pool#2" || a.Resources()[0] != a.Slot() {
		t.Fatalf("slots %q and %q (resources %q), want sem/pool#1 and sem/pool#2", a.Slot(), b.Slot(), a.Resources())
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if _, err := c.Acquire(ctx, "sem/pool", client.Semaphore(2)); !errors.Is(err, leasehold.ErrHeld) {
		t.Fatalf("a third holder without a wait: %v, want held", err)
	}
	if _, err := c.Acquire(ctx, "sem/pool"); !errors.Is(err, leasehold.ErrConflict) {
		t.Fatalf("a lock on a semaphore: %v, want a conflict", err)
	}
	if _, err := c.Acquire(ctx, "sem/pool", client.Semaphore(3)); !errors.Is(err, leasehold.ErrConflict) {
		t.Fatalf("another limit: %v, want a conflict", err)
	}
	third := make(chan *client.Lease, 1)
	go func() {
		l, err := c.Acquire(context.Background(), "sem/pool", client.Semaphore(2), client.Wait(time.Minute), client.TTL(30*time.Second))
		if err != nil {
			t.Errorf("the waiting holder: %v", err)
		}
		third <- l
	}()
	deadline := time.Now().Add(callTimeout)
	for len(get(t, c, "sem/pool").Waiters) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the third holder never queued")
		}
		time.Sleep(10 * time.Millisecond)
	}
	res := get(t, c, "sem/pool")
	if res.Limit != 2 || len(res.Slots) != 2 || res.Holder != nil || res.Slots[0].ID != a.ID() || res.Slots[1].Semaphore != "sem/pool" {
		t.Fatalf("Get of the semaphore: limit %d, slots %+v, holder %v", res.Limit, res.Slots, res.Holder)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var l *client.Lease
	select {
	case l = <-third:
	case <-time.After(callTimeout):
		t.Fatal("the waiting holder was not granted the freed slot")
	}
	if l == nil {
		return
	}
	if l.Slot() != "sem/pool#1" || l.Token() <= a.Token() {
		t.Fatalf("the waiter got slot %q token %d, want sem/pool#1 with a token above %d", l.Slot(), l.Token(), a.Token())
	}
	l.Release(ctx)
	b.Release(ctx)
}
