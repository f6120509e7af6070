package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testcluster"
)

// A contended hand-off costs one log entry: the release's entry grants the
// next waiter and answers it from that apply. Eight waiters queue behind a
// holder and each releases as soon as it is granted; from the holder's
// release to the last waiter's, the log grows by the nine releases and
// nothing else. Both client shapes: a client per waiter (unary waiting
// acquires) and one shared client (queued by a Batch, waited for by a
// follow-up that claims the place).
func TestContendedHandoffCostsOneEntry(t *testing.T) {
	for _, shared := range []bool{false, true} {
		name := map[bool]string{false: "client per waiter", true: "shared client"}[shared]
		t.Run(name, func(t *testing.T) {
			c := testcluster.Start(t, 1)
			n := c.Node(c.WaitLeader(10 * time.Second))
			const waiters = 8
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			opts := []client.Option{client.TTL(time.Minute), client.Wait(time.Minute), client.ManualRenew(), client.ProgressTimeout(0)}
			holder := newTestClient(t, 30*time.Second, c.URLs()...)
			first, err := holder.Acquire(ctx, "handoff", opts...)
			if err != nil {
				t.Fatal(err)
			}
			one := newTestClient(t, 90*time.Second, c.URLs()...)
			var wg sync.WaitGroup
			errs := make(chan error, waiters)
			tokens := make(chan uint64, waiters)
			for range waiters {
				cl := one
				if !shared {
					cl = newTestClient(t, 90*time.Second, c.URLs()...)
				}
				wg.Go(func() {
					l, err := cl.Acquire(ctx, "handoff", opts...)
					if err == nil {
						tokens <- l.Token()
						err = l.Release(ctx)
					}
					if err != nil {
						errs <- err
					}
				})
			}
			deadline := time.Now().Add(30 * time.Second)
			for n.Cluster.Stats().Counts.Waiters < waiters {
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d waiters queued within 30s", n.Cluster.Stats().Counts.Waiters, waiters)
				}
				time.Sleep(10 * time.Millisecond)
			}
			before := n.Cluster.Stats().AppliedIndex
			if err := first.Release(ctx); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			close(tokens)
			last := first.Token()
			for tok := range tokens { // granted in line: each token above the one before
				if tok <= last {
					t.Errorf("token %d granted after %d", tok, last)
				}
				last = tok
			}
			entries := n.Cluster.Stats().AppliedIndex - before
			if entries > waiters+1 {
				t.Errorf("%d hand-offs took %d log entries, want at most %d (one release each, the holder's included)", waiters, entries, waiters+1)
			}
		})
	}
}
