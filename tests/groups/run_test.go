package groups_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/groups"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/internal/testutil"
)

// A second member takes half of the partitions, each only after the first
// member's function for it returned (it takes 300ms to stop): no
// partition ever runs on both. When the second member leaves, the first
// runs them all again, well within a TTL (Leave hands them over at once).
func TestRunMovesPartitionsOnlyAfterTheFunctionReturned(t *testing.T) {
	n := testcluster.StartNode(t, "")
	c := newClient(t, n.URL)
	createGroup(t, c, "g", 8)
	tr := newTracker(t)
	runMember(t, c, "g", "a", tr.fn("a", 300*time.Millisecond), groups.TTL(10*time.Second))
	testutil.Eventually(t, 20*time.Second, "a runs all 8 partitions", func() bool { return tr.owned()["a"] == 8 })
	stopB := runMember(t, c, "g", "b", tr.fn("b", 0), groups.TTL(10*time.Second))
	testutil.Eventually(t, 20*time.Second, "a and b run 4 partitions each", func() bool {
		o := tr.owned()
		return o["a"] == 4 && o["b"] == 4
	})
	left := time.Now()
	stopB()
	testutil.Eventually(t, 20*time.Second, "a runs all 8 again after b left", func() bool { return tr.owned()["a"] == 8 })
	if d := time.Since(left); d > 5*time.Second {
		t.Fatalf("a got b's partitions back %v after b left; Leave should hand them over at once", d)
	}
}

// With renewals cut off, the partition's context ends StopMargin before
// the session's local safe deadline (not at it), with ErrSessionAtRisk;
// once the link is back, Run joins again and gets the partition back with
// a larger epoch.
func TestRunCancelsBeforeTheSessionDeadlineAndRejoins(t *testing.T) {
	n := testcluster.StartNode(t, "")
	admin := newClient(t, n.URL)
	createGroup(t, admin, "g", 1)
	proxy := testcluster.NewProxy(t, strings.TrimPrefix(n.URL, "http://"))
	c := newClient(t, proxy.URL())
	type run struct {
		epoch    uint64
		left     time.Duration // time left to the session's deadline when ctx ended
		cause    error
		finished bool
	}
	var mu sync.Mutex
	var runs []run
	const ttl, margin = 3 * time.Second, time.Second
	runMember(t, c, "g", "a", func(ctx context.Context, p int, epoch uint64) error {
		mu.Lock()
		runs = append(runs, run{epoch: epoch})
		i := len(runs) - 1
		mu.Unlock()
		<-ctx.Done()
		left := time.Until(groups.SessionDeadline(ctx))
		mu.Lock()
		runs[i].left, runs[i].cause, runs[i].finished = left, context.Cause(ctx), true
		mu.Unlock()
		return nil
	}, groups.TTL(ttl), groups.StopMargin(margin))
	count := func() (int, run) {
		mu.Lock()
		defer mu.Unlock()
		if len(runs) == 0 {
			return 0, run{}
		}
		return len(runs), runs[0]
	}
	testutil.Eventually(t, 20*time.Second, "a runs partition 0", func() bool { n, _ := count(); return n == 1 })
	proxy.Cut()
	testutil.Eventually(t, 20*time.Second, "the partition's context ends", func() bool { _, r := count(); return r.finished })
	_, first := count()
	if !errors.Is(first.cause, groups.ErrSessionAtRisk) {
		t.Fatalf("the context ended with %v, want ErrSessionAtRisk", first.cause)
	}
	if first.left < margin/2 {
		t.Fatalf("the context ended %v before the session's safe deadline, want about StopMargin (%v)", first.left, margin)
	}
	proxy.Heal()
	testutil.Eventually(t, 30*time.Second, "a runs partition 0 again in a new session", func() bool { n, _ := count(); return n == 2 })
	mu.Lock()
	defer mu.Unlock()
	if runs[1].epoch <= runs[0].epoch {
		t.Fatalf("the epoch after rejoining is %d, not above %d", runs[1].epoch, runs[0].epoch)
	}
}

// A function that fails is started again, after the backoff, with the
// same epoch while the partition is still owned.
func TestRunRestartsAFailedFunction(t *testing.T) {
	n := testcluster.StartNode(t, "")
	c := newClient(t, n.URL)
	createGroup(t, c, "g", 1)
	var mu sync.Mutex
	var calls []time.Time
	var epochs []uint64
	const backoff = 200 * time.Millisecond
	runMember(t, c, "g", "a", func(ctx context.Context, p int, epoch uint64) error {
		mu.Lock()
		calls, epochs = append(calls, time.Now()), append(epochs, epoch)
		n := len(calls)
		mu.Unlock()
		if n < 3 {
			return errors.New("not yet")
		}
		<-ctx.Done()
		return nil
	}, groups.RestartBackoff(backoff, time.Second))
	testutil.Eventually(t, 20*time.Second, "the function is called a third time", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) >= 3
	})
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 3 {
		t.Fatalf("called %d times, want 3 (it stopped failing)", len(calls))
	}
	if epochs[0] != epochs[1] || epochs[1] != epochs[2] {
		t.Fatalf("epochs %v: the restarts should keep the grant's epoch", epochs)
	}
	if d := calls[1].Sub(calls[0]); d < backoff {
		t.Fatalf("restarted after %v, before the backoff of %v", d, backoff)
	}
	if d := calls[2].Sub(calls[1]); d < 2*backoff {
		t.Fatalf("restarted a second time after %v, want the backoff doubled (%v)", d, 2*backoff)
	}
}
