package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// Three parties Await a barrier of three: none returns before the last
// arrives, all return the same trip (phase 1, one token), and the next
// phase is open with nobody arrived. A party that gives up (its ctx ends)
// is withdrawn, so it is not counted.
func TestAwaitTripsTogether(t *testing.T) {
	n := startNode(t)
	c := nodeClient(t, n)
	ctx := ctxFor(t, 30*time.Second)
	if _, err := c.CreateBarrier(ctx, "jobs/phase", 3); err != nil {
		t.Fatal(err)
	}
	// One that gives up before the others come.
	gctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := c.Await(gctx, "jobs/phase", client.As("quitter")); err == nil || gctx.Err() == nil {
		t.Fatalf("an Await that gave up: %v (its context: %v)", err, gctx.Err())
	}
	waitForArrivals(t, c, "jobs/phase", 0) // the quitter's arrival is withdrawn (given back, if it came late)
	var wg sync.WaitGroup
	ends := make([]client.PhaseEnd, 3)
	errs := make([]error, 3)
	returned := make(chan int, 3)
	for i := range 3 {
		if i == 2 {
			select {
			case j := <-returned:
				t.Fatalf("party %d returned before the last party arrived", j)
			case <-time.After(300 * time.Millisecond):
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ends[i], errs[i] = c.Await(ctx, "jobs/phase", client.As(fmt.Sprint("w", i)), client.ArrivalTTL(5*time.Second))
			returned <- i
		}()
		if i < 2 {
			waitForArrivals(t, c, "jobs/phase", i+1)
		}
	}
	wg.Wait()
	for i := range 3 {
		if errs[i] != nil || ends[i].Outcome != "tripped" || ends[i].Phase != 1 || ends[i].Token == 0 || ends[i].Token != ends[0].Token {
			t.Fatalf("party %d: %+v %v (party 0: %+v)", i, ends[i], errs[i], ends[0])
		}
	}
	if b, err := c.GetBarrier(ctx, "jobs/phase"); err != nil || b.Phase != 2 || b.Arrived != 0 || b.Trips != 1 {
		t.Fatalf("after the trip: %+v %v", b, err)
	}
}

func waitForArrivals(t *testing.T, c *testClient, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := c.GetBarrier(ctxFor(t, 5*time.Second), name)
		if err == nil && b.Arrived == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %+v (%v), want %d arrived", name, b, err, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A latch: WaitPhase blocks until it is counted down to zero; a reset
// breaks the next phase's waiters (ErrBarrierBroken), and a deleted latch
// answers ErrNotFound.
func TestLatchCountDownWaitReset(t *testing.T) {
	n := startNode(t)
	c := nodeClient(t, n)
	ctx := ctxFor(t, 30*time.Second)
	if _, err := c.CreateBarrier(ctx, "batch/done", 2, client.Latch()); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		e, err := c.WaitPhase(ctx, "batch/done", 0)
		if err == nil && (e.Outcome != "tripped" || e.Phase != 1) {
			err = fmt.Errorf("ended %+v", e)
		}
		got <- err
	}()
	if _, end, err := c.CountDown(ctx, "batch/done", 1); err != nil || end != nil {
		t.Fatalf("first count-down: %v %v", end, err)
	}
	select {
	case err := <-got:
		t.Fatalf("the wait returned at 1 of 2: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if _, end, err := c.CountDown(ctx, "batch/done", 1); err != nil || end == nil || end.Outcome != "tripped" {
		t.Fatalf("last count-down: %v %v", end, err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if _, err := c.ResetBarrier(ctx, "batch/done"); err != nil {
		t.Fatal(err)
	}
	go func() {
		_, err := c.WaitPhase(ctx, "batch/done", 2)
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if end, err := c.ResetBarrier(ctx, "batch/done"); err != nil || end.Outcome != "reset" || end.Phase != 2 {
		t.Fatalf("reset of phase 2: %+v %v", end, err)
	}
	if err := <-got; !errors.Is(err, client.ErrBarrierBroken) {
		t.Fatalf("a wait for a phase reset: %v, want ErrBarrierBroken", err)
	}
	if err := c.DeleteBarrier(ctx, "batch/done"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitPhase(ctx, "batch/done", 0); !errors.Is(err, leasehold.ErrNotFound) {
		t.Fatalf("wait for a deleted latch: %v", err)
	}
}

// A WaitPhase whose ctx ends while the phase goes on returns ctx's
// error, every time: the node's wait is asked to end before the call's
// deadline, so the node never answers "deadline passed" first.
func TestWaitPhaseEndsWithItsContext(t *testing.T) {
	n := startNode(t)
	c := nodeClient(t, n)
	if _, err := c.CreateBarrier(ctxFor(t, 10*time.Second), "never", 2); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		_, err := c.WaitPhase(ctx, "never", 0)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("wait %d for a phase that does not end, ctx 150ms: %v; want ctx's deadline", i, err)
		}
	}
}

// A party's renewal that runs after the phase tripped finds its lease
// gone (the trip ended it): its Wait still answers the trip, not
// ErrLeaseLost, since the phase ended and the party was counted.
func TestWaitAnswersTheTripAfterARenewalFoundTheLeaseGone(t *testing.T) {
	n := startNode(t)
	c := nodeClient(t, n)
	ctx := ctxFor(t, 30*time.Second)
	if _, err := c.CreateBarrier(ctx, "jobs/renewed", 2); err != nil {
		t.Fatal(err)
	}
	a, err := c.Arrive(ctx, "jobs/renewed", client.As("early"), client.ArrivalTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Arrive(ctx, "jobs/renewed", client.As("last"))
	if err != nil || b.Tripped() == nil {
		t.Fatalf("the last arrival: %+v %v", b, err)
	}
	// Its renewal (every TTL/3) finds the lease ended by the trip.
	waitDone(t, a.Lease(), 10*time.Second)
	end, err := a.Wait(ctx)
	if err != nil || end.Outcome != "tripped" || end.Phase != 1 || end.Token != b.Tripped().Token {
		t.Fatalf("Wait after the renewal found the lease gone: %+v %v (the trip: %+v)", end, err, *b.Tripped())
	}
}
