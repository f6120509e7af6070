package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
)

// TestCloseEndsLeasesAndRefusesCalls: Close, called from several
// goroutines at once and again after, returns nil; it ends a lease still
// held at once (Done, Context, Err matching ErrLeaseLost and ErrClosed)
// and stops its renewal, so the server lets it expire; every call after it
// fails with ErrClosed. goleak (TestMain) checks that no renewal loop or
// Context watcher outlives it.
func TestCloseEndsLeasesAndRefusesCalls(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c, other := nodeClient(t, n), nodeClient(t, n)
	ctx := ctxFor(t, 30*time.Second)

	l, err := c.Acquire(ctx, "close/held", client.TTL(time.Second), client.ProgressTimeout(0))
	if err != nil {
		t.Fatal(err)
	}
	work := l.Context(ctx)
	freed := mustAcquire(t, c, []string{"close/freed"}, client.TTL(time.Minute))
	if err := freed.Release(ctx); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	wg.Wait()
	if err := c.Close(); err != nil {
		t.Fatalf("Close again: %v", err)
	}

	if !isDone(l) {
		t.Fatal("a lease still held is not done when Close returns")
	}
	if m := missing(l.Err(), client.ErrLeaseLost, client.ErrClosed); len(m) > 0 {
		t.Fatalf("lease Err %v does not match %v", l.Err(), m)
	}
	select {
	case <-work.Done():
		if m := missing(context.Cause(work), client.ErrLeaseLost, client.ErrClosed); len(m) > 0 {
			t.Fatalf("lease Context cause %v does not match %v", context.Cause(work), m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the lease's Context was not canceled after Close")
	}
	if !errors.Is(freed.Err(), client.ErrReleased) {
		t.Fatalf("a lease released before Close: Err %v, want ErrReleased", freed.Err())
	}

	// Nothing renews the lease any more: the server lets it expire (it
	// would hold for as long as renewals went on).
	eventually(t, 15*time.Second, "close/held expires on the server after Close", func() bool {
		return get(t, other, "close/held").Holder == nil
	})

	if _, err := c.Get(ctx, "close/held"); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Get after Close: %v, want ErrClosed", err)
	}
	if l2, err := c.Acquire(ctx, "close/new"); !errors.Is(err, client.ErrClosed) {
		if l2 != nil {
			l2.Release(ctx)
		}
		t.Fatalf("Acquire after Close: %v, want ErrClosed", err)
	}
	if err := l.Release(ctx); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Release after Close: %v, want ErrClosed", err)
	}
	if h := get(t, other, "close/new").Holder; h != nil {
		t.Fatalf("an Acquire after Close took close/new: lease %d", h.ID)
	}
}
