package integration

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testcluster"
)

// A follower forwards transactions, bound puts and key lists to the
// leader: a client that knows only a follower gets the same answers.
func TestFollowerForwardsTxnAndBoundKeys(t *testing.T) {
	c := testcluster.Start(t, 3)
	lead := c.WaitLeader(10 * time.Second)
	via := newTestClient(t, time.Second, c.URL((lead+1)%3))
	ctx := ctxFor(t, 30*time.Second)
	lease, err := via.Acquire(ctx, "fwd/svc", client.TTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	res, err := via.Txn(ctx).If(client.Absent("fwd/alive/a")).
		Then(client.OpPut("fwd/alive/a", []byte("a"), client.BindLease(lease))).Commit()
	if err != nil || !res.Succeeded {
		t.Fatalf("txn through a follower: %+v (%v)", res, err)
	}
	if _, err := via.Put(ctx, "fwd/alive/b", []byte("b"), client.BindLease(lease)); err != nil {
		t.Fatalf("bound put through a follower: %v", err)
	}
	var keys []string
	for k, err := range via.Keys(ctx, "fwd/alive/") {
		if err != nil {
			t.Fatalf("list through a follower: %v", err)
		}
		if k.LeaseID != lease.ID() {
			t.Errorf("%s is bound to %d, want lease %d", k.Key, k.LeaseID, lease.ID())
		}
		keys = append(keys, k.Key)
	}
	if len(keys) != 2 {
		t.Fatalf("listed %v through a follower, want both keys", keys)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for k, err := range via.Keys(ctx, "fwd/alive/") {
		t.Fatalf("after the release, the list still has %+v (%v)", k, err)
	}
}
