package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
)

// TestLossSeenAtFirstCheckAfterPause: a holder whose renewal goroutine has
// not run since before the safe deadline (the process was paused: SIGSTOP,
// a long GC or swap) sees the loss at its first check of Lease.Err or of
// the lease's Context's Err, before any goroutine of the client runs.
func TestLossSeenAtFirstCheckAfterPause(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := nodeClient(t, n)
	stalled, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	client.StallRenewals(c.Client, func() {
		once.Do(func() { close(stalled) })
		<-resume
	})
	defer close(resume) // before hold's cleanup and the node's stop

	l := mustAcquire(t, c, []string{"pause/holder"}, client.TTL(time.Second), client.ProgressTimeout(0))
	ctx := l.Context(context.Background())
	select {
	case <-stalled:
	case <-time.After(callTimeout):
		t.Fatal("the renewal loop never woke")
	}
	if err := l.Err(); err != nil {
		t.Fatalf("Err() before the deadline = %v", err)
	}
	// The renewal loop is stuck in its first wake, so nothing renews the
	// lease or ends it: wait until the safe deadline has passed.
	time.Sleep(time.Until(l.Deadline()) + time.Millisecond)

	if err := ctx.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("lease context's Err() past the deadline = %v, want Canceled", err)
	}
	if cause := context.Cause(ctx); !errors.Is(cause, client.ErrLeaseLost) {
		t.Fatalf("cause %v, want ErrLeaseLost", cause)
	}
	if err := l.Err(); !errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("Err() past the deadline = %v, want ErrLeaseLost", err)
	}
	if !isDone(l) {
		t.Fatal("Done not closed once Err reported the loss")
	}
}
