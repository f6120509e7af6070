package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// FencedByPartition and FencedByDelivery fence Put, Delete, Txn and the
// Check calls with a partition's epoch and a delivery's token, on a real
// node: accepted while current, leasehold.ErrStaleToken after the
// partition left its owner or the delivery was acked.
func TestFencedByPartitionAndDelivery(t *testing.T) {
	n := startNode(t)
	c := nodeClient(t, n)
	ctx := ctxFor(t, 30*time.Second)
	if _, err := c.CreateGroup(ctx, "g", 1); err != nil {
		t.Fatal(err)
	}
	a, err := c.Join(ctx, "g", "a", client.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	g, err := c.Group(ctx, "g")
	if err != nil || len(g.PartitionList) != 1 || g.PartitionList[0].Owner != "a" {
		t.Fatalf("group: %+v %v", g, err)
	}
	epoch := g.PartitionList[0].Epoch
	if _, err := c.Put(ctx, "out/p", []byte("1"), client.FencedByPartition("g", 0, epoch)); err != nil {
		t.Fatalf("put fenced by the owner's epoch: %v", err)
	}
	if _, err := c.Txn(ctx).Then(client.OpPut("out/t", []byte("1"))).FencedByPartition("g", 0, epoch).Commit(); err != nil {
		t.Fatalf("txn fenced by the owner's epoch: %v", err)
	}
	if err := c.CheckPartitionFence(ctx, "g", 0, epoch); err != nil {
		t.Fatal(err)
	}
	if err := a.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "out/p", []byte("2"), client.FencedByPartition("g", 0, epoch)); !errors.Is(err, leasehold.ErrStaleToken) {
		t.Fatalf("put fenced by the epoch of a member that left: %v, want ErrStaleToken", err)
	}
	if err := c.CheckPartitionFence(ctx, "g", 0, epoch); !errors.Is(err, leasehold.ErrStaleToken) {
		t.Fatalf("check of the epoch of a member that left: %v, want ErrStaleToken", err)
	}

	if _, err := c.CreateQueue(ctx, "jobs", client.QueueSettings{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, "jobs", leasehold.Message{Key: "k", Body: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	ds, err := c.Receive(ctx, "jobs", 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %v %v", ds, err)
	}
	d := ds[0]
	if _, err := c.Put(ctx, "out/q", []byte("1"), client.FencedByDelivery(d.Queue, d.Key, d.Token)); err != nil {
		t.Fatalf("put fenced by the delivery in flight: %v", err)
	}
	if err := c.Delete(ctx, "out/q", client.FencedByDelivery(d.Queue, d.Key, d.Token)); err != nil {
		t.Fatalf("delete fenced by the delivery in flight: %v", err)
	}
	if err := c.CheckDeliveryFence(ctx, d.Queue, d.Key, d.Token); err != nil {
		t.Fatal(err)
	}
	if err := c.Ack(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Txn(ctx).Then(client.OpPut("out/q", []byte("2"))).FencedByDelivery(d.Queue, d.Key, d.Token).Commit(); !errors.Is(err, leasehold.ErrStaleToken) {
		t.Fatalf("txn fenced by an acked delivery: %v, want ErrStaleToken", err)
	}
	if err := c.CheckDeliveryFence(ctx, d.Queue, d.Key, d.Token); !errors.Is(err, leasehold.ErrStaleToken) {
		t.Fatalf("check of an acked delivery: %v, want ErrStaleToken", err)
	}
}
