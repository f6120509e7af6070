package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// An operator forces the release of a lease whose holder keeps working:
// the holder's next fenced write is refused, its lease ends, its Release
// reports the work done after the loss, and the audit log says who and why.
func TestForceReleaseWhileHolderWorks(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	holder, op := nodeClient(t, n), nodeClient(t, n)
	const res = "cadm/job"

	l := mustAcquire(t, holder, []string{res}, client.TTL(time.Second), client.Owner("worker-1"), client.Operation("export"))
	stop := make(chan struct{})
	working := make(chan struct{})
	go func() { // the holder works on, reporting progress, so renewal goes on
		defer close(working)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-l.Done():
				return
			case <-tick.C:
				l.Progress("rows written")
			}
		}
	}()
	defer func() { close(stop); <-working }()

	ctx := ctxFor(t, callTimeout)
	if _, err := holder.Put(ctx, "cadm/job/out", []byte("1"), client.FencedBy(l, res)); err != nil {
		t.Fatalf("the holder's fenced write: %v", err)
	}
	locks, err := op.Locks(ctx, client.LocksQuery{Resource: res})
	if err != nil || len(locks) != 1 || locks[0].Holder == nil || locks[0].Holder.ID != l.ID() || locks[0].Holder.Owner != "worker-1" || locks[0].Holder.Token != l.Token() {
		t.Fatalf("locks show %s: %v, %v", res, locks, err)
	}
	if all, err := op.Locks(ctx, client.LocksQuery{Prefix: "cadm/"}); err != nil || len(all) != 1 {
		t.Fatalf("locks under cadm/: %v, %v", all, err)
	}

	// A stale lease id releases nothing.
	if _, err := op.ForceRelease(ctx, res, l.ID()+100, "wrong lease"); !errors.Is(err, leasehold.ErrNotHolder) {
		t.Fatalf("forced release naming another lease: %v, want ErrNotHolder", err)
	}
	if isDone(l) {
		t.Fatal("a refused forced release ended the lease")
	}

	const reason = "export stuck for an hour, ticket OPS-7"
	ended, err := op.ForceRelease(ctx, res, l.ID(), reason)
	if err != nil || ended == nil || ended.ID != l.ID() {
		t.Fatalf("forced release: %v, %v", ended, err)
	}
	// The holder has not noticed yet: its fenced write is refused.
	if _, err := holder.Put(ctx, "cadm/job/out", []byte("2"), client.FencedBy(l, res)); !errors.Is(err, leasehold.ErrStaleToken) {
		t.Fatalf("the ex-holder's fenced write: %v, want ErrStaleToken", err)
	}
	waitDone(t, l, 5*time.Second)
	if !errors.Is(l.Err(), client.ErrLeaseLost) {
		t.Fatalf("the forced-out lease ended with %v, want ErrLeaseLost", l.Err())
	}
	if err := l.Release(ctx); !errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("Release after a forced release: %v, want ErrLeaseLost", err)
	}
	if got := counter(t, holder.Reg, "leasehold_client_work_after_loss_total"); got != 1 {
		t.Fatalf("leasehold_client_work_after_loss_total = %v, want 1", got)
	}

	recs, truncated, err := op.Audit(ctx, time.Hour, 0)
	if err != nil || truncated || len(recs) != 1 {
		t.Fatalf("audit: %v (truncated %v), %v", recs, truncated, err)
	}
	if a := recs[0]; a.Actor != "anonymous" || a.Reason != reason || a.LeaseID != l.ID() || a.Token != l.Token() ||
		a.Resource != res || a.Owner != "worker-1" || a.Operation != "export" {
		t.Fatalf("audit record: %v", a)
	}
	if _, _, err := op.Audit(ctx, -time.Second, 0); !errors.Is(err, leasehold.ErrInvalid) {
		t.Fatalf("audit with a negative since: %v, want ErrInvalid", err)
	}
	if _, err := op.ForceRelease(ctx, res, l.ID(), ""); !errors.Is(err, leasehold.ErrInvalid) {
		t.Fatalf("forced release without a reason: %v, want ErrInvalid", err)
	}
}
