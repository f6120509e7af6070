package integration

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cluster"
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

// Workers looping {acquire the one resource, release} make each hand-off
// one log entry: the releaser's next acquire, which will queue, rides in
// the entry of the next holder's release instead of taking a commit of its
// own ahead of it (cluster.Node.ProposeBehind). Without that it is two
// entries a grant, and a hand-off waits for two fsyncs whenever the
// acquire gets to the log first. FIFO order holds: every worker is granted
// about as often as every other. With one shared client too, whose
// release must not be stuck behind batches of acquires the node holds for
// company (client.batchInflight).
func TestContendedLoopCostsOneEntryPerGrant(t *testing.T) {
	t.Run("client per worker", func(t *testing.T) { contendedLoop(t, false) })
	t.Run("shared client", func(t *testing.T) { contendedLoop(t, true) })
}

func contendedLoop(t *testing.T, shared bool) {
	// A roomy linger: a loaded machine may take a while to send the
	// release. An acquire that waits it out instead of riding (or a release
	// stuck behind one) shows as a hand-off that slow.
	const linger = 200 * time.Millisecond
	c := testcluster.Start(t, 1, func(cfg *cluster.Config) { cfg.QueueLinger = linger })
	n := c.Node(c.WaitLeader(10 * time.Second))
	const workers, warmup, measured = 8, 40, 400
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := []client.Option{client.TTL(time.Minute), client.Wait(time.Minute), client.ManualRenew(), client.ProgressTimeout(0)}
	var grants atomic.Int64
	var from, to atomic.Uint64
	var began, ended atomic.Int64
	perWorker := make([]int, workers)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	one := newTestClient(t, 90*time.Second, c.URLs()...)
	for w := range workers {
		cl := one
		if !shared {
			cl = newTestClient(t, 90*time.Second, c.URLs()...)
		}
		wg.Go(func() {
			for ctx.Err() == nil {
				l, err := cl.Acquire(ctx, "loop", opts...)
				if err != nil {
					errs <- err
					return
				}
				g := grants.Add(1)
				if g == warmup {
					from.Store(n.Cluster.Stats().AppliedIndex)
					began.Store(time.Now().UnixNano())
				}
				if g == warmup+measured {
					to.Store(n.Cluster.Stats().AppliedIndex)
					ended.Store(time.Now().UnixNano())
				}
				if err := l.Release(ctx); err != nil {
					errs <- err
					return
				}
				if g > warmup && g <= warmup+measured {
					perWorker[w]++
				}
				if g >= warmup+measured {
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	perGrant := float64(to.Load()-from.Load()) / measured
	handoff := time.Duration(ended.Load()-began.Load()) / measured
	t.Logf("%.2f log entries per grant, a hand-off every %v; grants per worker %v", perGrant, handoff, perWorker)
	if handoff > linger/10 {
		t.Errorf("a hand-off every %v, want well under the linger of %v: acquires waited out their linger", handoff, linger)
	}
	if perGrant > 1.25 {
		t.Errorf("%.2f log entries per contended grant, want about 1 (at most 1.25)", perGrant)
	}
	for w, k := range perWorker {
		if k < measured/workers/2 {
			t.Errorf("worker %d was granted %d times of %d, want about %d (FIFO)", w, k, measured, measured/workers)
		}
	}
}
