package server_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
)

// pause lets time pass on purpose (a deadline has to run down); it is not
// a wait for a condition.
func pause(d time.Duration) { <-time.After(d) }

// TestRetrySafety checks that a retried request (same request_id) never
// tells the caller more than is true: invariant 3 (the client's deadline is
// never later than the server's) must hold for answers from the dedup
// window too.
func TestRetrySafety(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := newClient(t, n)

	// A retry with another secret must not hand back a secret that does not
	// prove the lease.
	t.Run("AcquireRetryWithAnotherSecret", func(t *testing.T) {
		t.Parallel()
		req := &pb.AcquireRequest{Resources: []string{"retry/secret"}, Ttl: dur(time.Minute), RequestId: "rs-1", Secret: newSecret(t)}
		first := mustAcquire(t, c, req)
		defer mustRelease(t, c, first)
		other := &pb.AcquireRequest{Resources: req.Resources, Ttl: req.Ttl, RequestId: req.RequestId, Secret: newSecret(t)}
		again, err := acquire(t, c, other)
		if err != nil || again.Secret == "" {
			return // refused, or answered without claiming to know the secret
		}
		if _, err := renew(c, again.Lease.GetId(), again.Secret); err != nil {
			t.Fatalf("a retry with another secret was answered with secret %q, which cannot renew lease %d: %v",
				again.Secret, again.Lease.GetId(), err)
		}
	})

	// A retry of an Acquire whose lease has since expired must not report
	// a live lease.
	t.Run("AcquireRetryAfterExpiry", func(t *testing.T) {
		t.Parallel()
		req := &pb.AcquireRequest{Resources: []string{"retry/expired"}, Ttl: dur(300 * time.Millisecond), RequestId: "re-1", Secret: newSecret(t)}
		first := mustAcquire(t, c, req)
		eventually(t, 5*time.Second, "the unrenewed lease did not expire", func() bool {
			return get(t, c, "retry/expired").GetHolder() == nil
		})
		again, err := acquire(t, c, req)
		if err != nil {
			wantCode(t, err, connect.CodeNotFound)
			return
		}
		if again.Lease.GetId() != first.Lease.GetId() {
			t.Fatalf("the retry was granted a new lease %d; the first was %d", again.Lease.GetId(), first.Lease.GetId())
		}
		t.Fatalf("lease %d has expired, but a retry of the acquire that made it succeeded with secret %q and expires_in %v",
			again.Lease.GetId(), again.Secret, again.Lease.GetExpiresIn().AsDuration())
	})

	// The expires_in of a retried Acquire counts from the retry: a client
	// that starts its clock before sending the retry must not end up with
	// a later deadline than the server's.
	t.Run("AcquireRetryExpiresIn", func(t *testing.T) {
		t.Parallel()
		const ttl = time.Second
		req := &pb.AcquireRequest{Resources: []string{"retry/late"}, Ttl: dur(ttl), RequestId: "rl-1", Secret: newSecret(t)}
		first := mustAcquire(t, c, req)
		firstReply := time.Now() // the server granted it before this
		defer release(c, first.Lease.GetId(), first.Secret)
		pause(ttl / 2)
		retrySent := time.Now()
		ctx := ctxFor(t, callTimeout)
		res, err := c.Acquire(ctx, connect.NewRequest(req))
		if err != nil {
			t.Fatalf("retry: %v", err)
		}
		clientDeadline := retrySent.Add(res.Msg.GetExpiresIn().AsDuration())
		serverDeadlineAtMost := firstReply.Add(ttl)
		if clientDeadline.After(serverDeadlineAtMost) {
			t.Fatalf("retry says expires_in %v; counted from the retry that is %v past the server's deadline",
				res.Msg.GetExpiresIn().AsDuration(), clientDeadline.Sub(serverDeadlineAtMost))
		}
	})

	// A retried Renew of a lease that has since expired must not report
	// time left.
	t.Run("RenewRetryAfterExpiry", func(t *testing.T) {
		t.Parallel()
		a := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"retry/renew-expired"}, Ttl: dur(300 * time.Millisecond)})
		req := &pb.RenewRequest{LeaseId: a.Lease.GetId(), Secret: a.Secret, RequestId: "rre-1"}
		ctx := ctxFor(t, callTimeout)
		if _, err := c.Renew(ctx, connect.NewRequest(req)); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "the lease did not expire", func() bool {
			return get(t, c, "retry/renew-expired").GetHolder() == nil
		})
		res, err := c.Renew(ctx, connect.NewRequest(req))
		if err != nil {
			return
		}
		if left := res.Msg.GetExpiresIn().AsDuration(); left > 0 {
			t.Fatalf("a retried renew of expired lease %d says it expires in %v", a.Lease.GetId(), left)
		}
	})

	// Same for a retried Renew.
	t.Run("RenewRetryExpiresIn", func(t *testing.T) {
		t.Parallel()
		const ttl = time.Second
		a := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"retry/renew"}, Ttl: dur(ttl)})
		defer release(c, a.Lease.GetId(), a.Secret)
		req := &pb.RenewRequest{LeaseId: a.Lease.GetId(), Secret: a.Secret, RequestId: "rr-1"}
		ctx := ctxFor(t, callTimeout)
		if _, err := c.Renew(ctx, connect.NewRequest(req)); err != nil {
			t.Fatal(err)
		}
		firstReply := time.Now()
		pause(ttl / 2)
		retrySent := time.Now()
		res, err := c.Renew(ctx, connect.NewRequest(req))
		if err != nil {
			t.Fatalf("retry: %v", err)
		}
		if res.Msg.GetLease().GetRenewCount() != 1 {
			t.Fatalf("the retry renewed again: renew count %d", res.Msg.GetLease().GetRenewCount())
		}
		clientDeadline := retrySent.Add(res.Msg.GetExpiresIn().AsDuration())
		if over := clientDeadline.Sub(firstReply.Add(ttl)); over > 0 {
			t.Fatalf("retry says expires_in %v; counted from the retry that is %v past the server's deadline",
				res.Msg.GetExpiresIn().AsDuration(), over)
		}
	})
}

// TestCanceledDuringProposeLeavesNoWaiter cancels waiting Acquires at
// moments spread over the first milliseconds, which lands some
// cancellations while the Acquire is being committed. None may leave a
// waiter (or a grant) behind.
func TestCanceledDuringProposeLeavesNoWaiter(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := newClient(t, n)
	const res = "orphan/x"
	h := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(time.Minute)})
	for i := range 60 {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Microsecond+time.Duration(i%12)*250*time.Microsecond)
		c.Acquire(ctx, connect.NewRequest(&pb.AcquireRequest{Resources: []string{res}, Wait: dur(time.Minute), Owner: "gone"}))
		cancel()
	}
	waitForWaiters(t, c, res, 0)
	mustRelease(t, c, h)
	eventually(t, 5*time.Second, "a canceled waiter was granted the resource", func() bool {
		g := get(t, c, res)
		return g.GetHolder() == nil && len(g.GetWaiters()) == 0
	})
}
