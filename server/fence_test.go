package server_test

import (
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// fencedPut writes key fenced by f; checkFence asks CheckFence about the
// same target.
func fencedPut(t *testing.T, kv leaseholdv1connect.KVClient, key string, f *pb.Fence) error {
	t.Helper()
	_, err := kv.Put(ctxFor(t, callTimeout), connect.NewRequest(&pb.PutRequest{Key: key, Value: []byte("v"), Fence: f}))
	return err
}

func checkFence(t *testing.T, kv leaseholdv1connect.KVClient, f *pb.Fence) error {
	t.Helper()
	_, err := kv.CheckFence(ctxFor(t, callTimeout), connect.NewRequest(&pb.CheckFenceRequest{Resource: f.Resource, Token: f.Token,
		Group: f.Group, Partition: f.Partition, Queue: f.Queue, Key: f.Key}))
	return err
}

// Through the API of a real node, a partition's epoch fences Put, Txn and
// CheckFence while its owner has it, also while it is being revoked, and
// is stale (Aborted) once the partition was handed over; a queue
// delivery's token fences them while the delivery is in flight and is
// stale after its ack.
func TestFenceByPartitionEpochAndDeliveryToken(t *testing.T) {
	n := startNode(t)
	hc := httpClient(t)
	kv := leaseholdv1connect.NewKVClient(hc, n.URL)
	groups := leaseholdv1connect.NewGroupsClient(hc, n.URL)
	if _, err := groups.Create(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsCreateRequest{Group: "shards", Partitions: 2})); err != nil {
		t.Fatal(err)
	}
	a := joinGroup(t, groups, "shards", "a", time.Minute)
	joinGroup(t, groups, "shards", "b", time.Minute)
	owners, got := groupOwners(t, groups, "shards")
	if owners[1] != "a*" {
		t.Fatalf("after b joined: %q, want partition 1 revoking from a", owners)
	}
	epoch := got.Partitions[1].Epoch
	byEpoch := &pb.Fence{Group: "shards", Partition: 1, Token: epoch}
	if err := fencedPut(t, kv, "out/1", byEpoch); err != nil {
		t.Fatalf("put fenced by the revoking owner's epoch: %v", err)
	}
	if err := checkFence(t, kv, byEpoch); err != nil {
		t.Fatalf("check-fence of the revoking owner's epoch: %v", err)
	}
	if _, err := groups.AckRevocation(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsAckRevocationRequest{Group: "shards",
		Member: "a", LeaseId: a.Lease.Id, Secret: a.Secret, Partition: 1, Epoch: epoch})); err != nil {
		t.Fatal(err)
	}
	wantCode(t, fencedPut(t, kv, "out/1", byEpoch), connect.CodeAborted, "stale", "partition 1 of group")
	wantCode(t, checkFence(t, kv, byEpoch), connect.CodeAborted, "stale")
	_, err := txn(kv, &pb.TxnRequest{ThenOps: []*pb.TxnOp{txnPut("out/2", nil)}, Fence: byEpoch})
	wantCode(t, err, connect.CodeAborted, "stale")
	_, got = groupOwners(t, groups, "shards")
	if err := fencedPut(t, kv, "out/1", &pb.Fence{Group: "shards", Partition: 1, Token: got.Partitions[1].Epoch}); err != nil {
		t.Fatalf("put fenced by the new owner's epoch: %v", err)
	}

	q := queuesClient(t, n.URL)
	createQueue(t, q, "jobs", nil)
	sendMsg(t, q, "jobs", "k", "body")
	d := receive(t, q, &pb.QueuesReceiveRequest{Queue: "jobs", Max: 1})[0]
	byDelivery := &pb.Fence{Queue: "jobs", Key: "k", Token: d.Token}
	if err := fencedPut(t, kv, "out/3", byDelivery); err != nil {
		t.Fatalf("put fenced by the delivery in flight: %v", err)
	}
	if _, err := txn(kv, &pb.TxnRequest{ThenOps: []*pb.TxnOp{txnPut("out/4", nil)}, Fence: byDelivery}); err != nil {
		t.Fatalf("txn fenced by the delivery in flight: %v", err)
	}
	if err := ack(q, ctxFor(t, callTimeout), d); err != nil {
		t.Fatal(err)
	}
	wantCode(t, fencedPut(t, kv, "out/3", byDelivery), connect.CodeAborted, "stale", `key "k" of queue "jobs"`)
	wantCode(t, checkFence(t, kv, byDelivery), connect.CodeAborted, "stale")
	if _, err := kvGet(kv, "out/2"); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("out/2 after only a stale transaction: %v, want NotFound", err)
	}
}

// A fence names exactly one target; anything else is InvalidArgument
// naming the field, in a write and in CheckFence, and writes nothing.
func TestFenceTargetValidation(t *testing.T) {
	n := startNode(t)
	kv := leaseholdv1connect.NewKVClient(httpClient(t), n.URL)
	cases := []struct {
		name  string
		fence *pb.Fence
		says  string
	}{
		{"no target", &pb.Fence{Token: 1}, "fence.resource must not be empty: name what the token fences"},
		{"resource and group", &pb.Fence{Resource: "r", Group: "g", Token: 1}, "fence.resource and fence.group are both set"},
		{"group and queue", &pb.Fence{Group: "g", Queue: "q", Key: "k", Token: 1}, "fence.group and fence.queue are both set"},
		{"partition without group", &pb.Fence{Resource: "r", Partition: 2, Token: 1}, "fence.partition is set without fence.group"},
		{"key without queue", &pb.Fence{Resource: "r", Key: "k", Token: 1}, "fence.key is set without fence.queue"},
		{"queue without key", &pb.Fence{Queue: "q", Token: 1}, "fence.key must not be empty"},
		{"bad group name", &pb.Fence{Group: "g\x00", Token: 1}, "fence.group has a control"},
		{"group without token", &pb.Fence{Group: "g"}, "fence.token must be set"},
		{"queue without token", &pb.Fence{Queue: "q", Key: "k"}, "fence.token must be set"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantCode(t, fencedPut(t, kv, "bad/put", tc.fence), connect.CodeInvalidArgument, tc.says)
			_, err := txn(kv, &pb.TxnRequest{ThenOps: []*pb.TxnOp{txnPut("bad/txn", nil)}, Fence: tc.fence})
			wantCode(t, err, connect.CodeInvalidArgument, tc.says)
			// CheckFence's fields are top-level: the same message without "fence.".
			wantCode(t, checkFence(t, kv, tc.fence), connect.CodeInvalidArgument, strings.ReplaceAll(tc.says, "fence.", ""))
		})
	}
	for _, key := range []string{"bad/put", "bad/txn"} {
		if _, err := kvGet(kv, key); connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("%s after only refused writes: %v, want NotFound", key, err)
		}
	}
}

// A worker fences only targets inside its prefixes: the group or queue a
// fence names is checked as its resource is.
func TestFenceTargetInsideWorkerPrefixes(t *testing.T) {
	n := authNode(t) // the worker token's prefix is jobs/
	kv := leaseholdv1connect.NewKVClient(httpClient(t), n.URL)
	for _, f := range []*pb.Fence{{Group: "billing", Token: 1}, {Queue: "billing", Key: "k", Token: 1},
		{Resource: "jobs/", Group: "billing", Token: 1}} { // not "jobs/billing"
		_, err := kv.Put(ctxFor(t, callTimeout), as(workerToken, &pb.PutRequest{Key: "jobs/out", Fence: f}))
		wantCode(t, err, connect.CodePermissionDenied)
		_, err = kv.CheckFence(ctxFor(t, callTimeout), as(workerToken, &pb.CheckFenceRequest{Group: f.Group, Queue: f.Queue,
			Key: f.Key, Token: 1}))
		wantCode(t, err, connect.CodePermissionDenied)
		_, err = kv.Txn(ctxFor(t, callTimeout), as(workerToken, &pb.TxnRequest{ThenOps: []*pb.TxnOp{txnPut("jobs/out", nil)}, Fence: f}))
		wantCode(t, err, connect.CodePermissionDenied)
	}
	// Inside its prefixes the fence is checked, and is stale.
	for _, f := range []*pb.Fence{{Group: "jobs/shards", Token: 1}, {Queue: "jobs/q", Key: "k", Token: 1}} {
		_, err := kv.Put(ctxFor(t, callTimeout), as(workerToken, &pb.PutRequest{Key: "jobs/out", Fence: f}))
		wantCode(t, err, connect.CodeAborted, "stale")
	}
}
