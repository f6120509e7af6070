package integration

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/internal/testutil"
)

// TestRestoreWithRevocationPendingAndDeliveryInFlight: a backup is taken
// while a queue delivery is in flight, a partition's revocation is pending
// and a semaphore slot is held; the old node then goes on (the partition
// is handed over, the message redelivered, the slot passed on: tokens and
// epochs no backup holds) before it is lost. On the node restored from the
// backup each comes back as it was at the backup: the delivery in flight
// to its first consumer (its token still nacks it), the partition still
// the revoking member's (the only owner), the slot its first holder's. Every
// grant after the restore, including the redelivery and the hand-over,
// carries a token above every token the old node gave, the ones after the
// backup included, so the old cluster's late holders are refused by any
// fence.
func TestRestoreWithRevocationPendingAndDeliveryInFlight(t *testing.T) {
	old := testcluster.StartNode(t, "")
	cl := newTestClient(t, 2*time.Second, old.URL)
	ctx := func() context.Context { return ctxFor(t, 20*time.Second) }

	if _, err := cl.CreateQueue(ctx(), "q", client.QueueSettings{Visibility: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Send(ctx(), "q", leasehold.Message{Key: "k", Body: []byte("m")}); err != nil {
		t.Fatal(err)
	}
	ds, err := cl.Receive(ctx(), "q", 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %v %v", ds, err)
	}
	d := ds[0]
	if _, err := cl.CreateGroup(ctx(), "g", 2, client.RevokeTimeout(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	a, err := cl.Join(ctx(), "g", "a", client.TTL(10*time.Minute), client.ManualRenew())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Join(ctx(), "g", "b", client.TTL(10*time.Minute), client.ManualRenew()); err != nil {
		t.Fatal(err)
	}
	atBackup, err := cl.Group(ctx(), "g")
	if err != nil || atBackup.PendingRevocations != 1 {
		t.Fatalf("group: %+v %v, want one revocation pending", atBackup.GroupInfo, err)
	}
	var revoking client.PartitionInfo
	for _, p := range atBackup.PartitionList {
		if p.Revoking {
			revoking = p
		}
	}
	slot, err := cl.Acquire(ctx(), "pool", client.Semaphore(1), client.TTL(10*time.Minute), client.ManualRenew())
	if err != nil {
		t.Fatal(err)
	}

	b := old.Cluster.Backup()

	// The old node goes on past the backup.
	var oldTokens []uint64
	if err := a.AckRevocation(ctx(), revoking.Partition, revoking.Epoch); err != nil {
		t.Fatal(err)
	}
	handed, err := cl.Group(ctx(), "g")
	if err != nil || handed.PartitionList[revoking.Partition].Owner != "b" {
		t.Fatalf("old node after the ack: %+v %v", handed.PartitionList, err)
	}
	oldTokens = append(oldTokens, handed.PartitionList[revoking.Partition].Epoch)
	if err := cl.Nack(ctx(), d, 0, "after the backup"); err != nil {
		t.Fatal(err)
	}
	again, err := cl.Receive(ctx(), "q", 1)
	if err != nil || len(again) != 1 {
		t.Fatalf("redelivery on the old node: %v %v", again, err)
	}
	oldTokens = append(oldTokens, again[0].Token)
	if err := slot.Release(ctx()); err != nil {
		t.Fatal(err)
	}
	next, err := cl.Acquire(ctx(), "pool", client.Semaphore(1), client.TTL(10*time.Minute), client.ManualRenew())
	if err != nil {
		t.Fatal(err)
	}
	oldTokens = append(oldTokens, next.Token())
	old.Stop()

	// Restore, as `leasehold snapshot restore` does, onto a new node.
	dir := t.TempDir()
	raftL := testutil.Listen(t)
	if err := cluster.SeedDataDir(dir, cluster.Seed{NodeID: "restored", Advertise: raftL.Addr().String(), Index: b.Index,
		Term: b.Term, State: b.State, TokenFloor: b.LastToken + cluster.RestoreTokenBump}); err != nil {
		t.Fatal(err)
	}
	floor := b.LastToken + cluster.RestoreTokenBump
	restored := testcluster.StartNode(t, dir, func(cfg *cluster.Config) {
		cfg.RaftListener.Close()
		cfg.NodeID, cfg.RaftListener, cfg.RaftAddr = "restored", raftL, raftL.Addr().String()
	})
	rc := newTestClient(t, 2*time.Second, restored.URL)

	info, err := rc.Queue(ctx(), "q", 10)
	if err != nil || info.InFlight != 1 || len(info.InFlightKeys) != 1 || info.InFlightKeys[0].Token != d.Token {
		t.Fatalf("restored queue: %+v %v, want the delivery with token %d in flight", info, err, d.Token)
	}
	g, err := rc.Group(ctx(), "g")
	if err != nil {
		t.Fatal(err)
	}
	if p := g.PartitionList[revoking.Partition]; p.Owner != "a" || !p.Revoking || p.Epoch != revoking.Epoch {
		t.Fatalf("restored partition %d: %+v, want a's revoking grant of epoch %d (b's later grant is in no backup)", revoking.Partition, p, revoking.Epoch)
	}
	if _, err := rc.Acquire(ctx(), "pool", client.Semaphore(1), client.TTL(time.Minute), client.ManualRenew()); err == nil {
		t.Fatal("a second holder of a 1-slot semaphore whose slot the backup holds")
	}

	// Every grant after the restore is above every token the old node gave.
	above := func(what string, tok uint64) {
		t.Helper()
		if tok < floor {
			t.Fatalf("%s after the restore: token %d, below the floor %d", what, tok, floor)
		}
		for _, o := range oldTokens {
			if tok <= o {
				t.Fatalf("%s after the restore: token %d, not above %d given by the old node after the backup", what, tok, o)
			}
		}
	}
	if err := rc.Nack(ctx(), d, 0, "after the restore"); err != nil {
		t.Fatalf("nack with the backup's delivery token: %v", err)
	}
	re, err := rc.Receive(ctx(), "q", 1)
	if err != nil || len(re) != 1 {
		t.Fatalf("redelivery after the restore: %v %v", re, err)
	}
	above("the redelivery", re[0].Token)

	// a's session came back with the backup: its acknowledgement, on the
	// restored node, hands the partition over.
	if _, err := rawGroups(t, restored.URL).AckRevocation(ctx(), connect.NewRequest(&pb.GroupsAckRevocationRequest{Group: "g", Member: "a",
		LeaseId: a.Lease().ID(), Secret: a.Lease().Secret(), Partition: uint32(revoking.Partition), Epoch: revoking.Epoch})); err != nil {
		t.Fatalf("acknowledgement on the restored node: %v", err)
	}
	g, err = rc.Group(ctx(), "g")
	if err != nil {
		t.Fatal(err)
	}
	p := g.PartitionList[revoking.Partition]
	if p.Owner != "b" || p.Revoking {
		t.Fatalf("partition %d after the acknowledgement on the restored node: %+v", revoking.Partition, p)
	}
	above("the hand-over", p.Epoch)
}
