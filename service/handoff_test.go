package service_test

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/leasehold/leasehold/service"
)

// A shared Go client queues a waiting acquire in a Batch, then sends the
// same request to Acquire to wait for it. When the release that grants it
// lands between the two (common under load: the place is taken over only
// when the follow-up arrives), the follow-up is answered from that grant:
// no second log entry for it, and no withdrawal of the place it claimed a
// grace period later. The hand-off costs the release's entry alone.
func TestFollowUpOfAGrantedPlaceCostsNoEntry(t *testing.T) {
	n := startWatchNode(t, service.HubConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	holderSecret, waiterSecret := sha256.Sum256([]byte("holder")), sha256.Sum256([]byte("waiter"))
	held, err := n.svc.Acquire(ctx, &service.AcquireRequest{RequestID: reqID(), Resources: []string{"handoff"}, Owner: "holder",
		TTL: time.Minute, SecretHash: holderSecret})
	if err != nil || held.Lease == nil {
		t.Fatalf("holder's acquire: %+v %v", held, err)
	}
	waiter := service.AcquireRequest{RequestID: reqID(), Resources: []string{"handoff"}, Owner: "waiter",
		TTL: time.Minute, Wait: 20 * time.Second, SecretHash: waiterSecret}
	queued := waiter
	res, err := n.svc.Batch(ctx, []service.LeaseOp{{Acquire: &queued}})
	if err != nil || res[0].Err != nil || !res[0].Queued {
		t.Fatalf("the batch should queue the waiter: %+v %v", res, err)
	}
	n.svc.HoldPlace(&queued) // as the server does for a queued batch acquire
	rel, err := n.svc.Release(ctx, &service.ReleaseRequest{RequestID: reqID(), LeaseID: held.Lease.ID, SecretHash: holderSecret})
	if err != nil {
		t.Fatalf("release: %+v %v", rel, err)
	}
	handedOff := n.hub.Stats().Applied // set inside Apply, before the answer (raft's AppliedIndex may lag it)

	followUp := waiter // a new receipt of the same request: its own attempt
	got, err := n.svc.Acquire(ctx, &followUp)
	if err != nil || got.Lease == nil {
		t.Fatalf("the follow-up should get the grant: %+v %v", got, err)
	}
	if got.Lease.Owner != "waiter" || got.Lease.Token <= held.Lease.Token {
		t.Fatalf("the follow-up got %+v, want the waiter's lease with a token above %d", got.Lease, held.Lease.Token)
	}
	if got.Remaining <= 0 || got.Remaining > time.Minute {
		t.Fatalf("the follow-up's remaining time is %v, want within (0, 1m]", got.Remaining)
	}
	// Past the grace a place that nobody claimed is withdrawn: wait it out
	// and check that nothing was proposed and the grant stands.
	time.Sleep(service.WithdrawGrace + time.Second)
	if extra := n.hub.Stats().Applied - handedOff; extra != 0 {
		t.Errorf("the follow-up and the place's grace cost %d log entries after the hand-off, want 0", extra)
	}
	if c := n.node.Stats().Counts; c.Leases != 1 {
		t.Errorf("%d leases held after the grace, want the waiter's 1", c.Leases)
	}
	// Leaving is still possible: the follow-up's caller releases.
	if rel, err := n.svc.Release(ctx, &service.ReleaseRequest{RequestID: reqID(), LeaseID: got.Lease.ID, SecretHash: waiterSecret}); err != nil {
		t.Fatalf("the waiter's release: %+v %v", rel, err)
	}
}
