package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/clock"
)

// stallClock is the system clock whose timers stop firing once stall is
// called: a renewal loop asleep on one then never wakes, as in a paused
// process (SIGSTOP, a long GC, swap), while Now goes on. resume runs the
// held timers.
type stallClock struct {
	clock.Real
	mu      sync.Mutex
	hold    bool
	held    []func()
	stalled chan struct{} // closed when a timer is first held
}

func (s *stallClock) stall() {
	s.mu.Lock()
	s.hold = true
	s.mu.Unlock()
}

func (s *stallClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.hold {
		return s.Real.AfterFunc(d, f)
	}
	if len(s.held) == 0 {
		close(s.stalled)
	}
	s.held = append(s.held, f)
	return heldTimer{}
}

type heldTimer struct{}

func (heldTimer) Stop() bool { return true }

func (s *stallClock) resume() {
	s.mu.Lock()
	held := s.held
	s.hold, s.held = false, nil
	s.mu.Unlock()
	for _, f := range held {
		go f()
	}
}

// TestLossSeenAtFirstCheckAfterPause: a holder whose renewal goroutine has
// not run since before the safe deadline (the process was paused: SIGSTOP,
// a long GC or swap) sees the loss at its first check of Lease.Err or of
// the lease's Context's Err, before any goroutine of the client runs.
func TestLossSeenAtFirstCheckAfterPause(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	clk := &stallClock{stalled: make(chan struct{})}
	c := newClient(t, client.Config{Clock: clk}, n.URL)
	defer clk.resume() // before hold's cleanup and the node's stop

	l := mustAcquire(t, c, []string{"pause/holder"}, client.TTL(time.Second), client.ProgressTimeout(0))
	ctx := l.Context(context.Background())
	// The renewal loop's next wake (a renewal, or the deadline) is a timer
	// of the clock: from now on the loop sleeps until the test resumes it.
	clk.stall()
	select {
	case <-clk.stalled:
	case <-time.After(callTimeout):
		t.Fatal("the renewal loop never went back to sleep")
	}
	if err := l.Err(); err != nil {
		t.Fatalf("Err() before the deadline = %v", err)
	}
	// The renewal loop sleeps on a timer that does not fire, so nothing
	// renews the lease or ends it: wait until the safe deadline has passed.
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
