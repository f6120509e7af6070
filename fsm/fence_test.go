package fsm

import (
	"bytes"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// fencedWrites are a Put, a Delete and a Txn fenced by f, each with its
// own key so that one's success does not decide another's.
func fencedWrites(f leasehold.Fence) map[string]Command {
	return map[string]Command{
		"put":    &Put{Key: "fenced/put", Value: []byte("v"), Fence: &f},
		"delete": &Delete{Key: "fenced/delete", Fence: &f},
		"txn":    &Txn{Fence: &f, Then: []TxnOp{{Key: "fenced/txn", Value: []byte("v")}}},
	}
}

// wantFence applies every fenced write and checks the read-side verdict:
// all accepted (want nil) or all refused as stale.
func wantFence(t *testing.T, h *harness, what string, f leasehold.Fence, accepted bool) {
	t.Helper()
	check := h.s.CheckFenceTarget(f)
	if r := h.one(&Put{Key: "fenced/delete", Value: []byte("x")}); r.Err != nil {
		t.Fatal(r.Err)
	}
	for op, c := range fencedWrites(f) {
		r := h.one(c)
		if accepted && r.Err != nil {
			t.Fatalf("%s: fenced %s refused: %v", what, op, r.Err)
		}
		if !accepted {
			wantCode(t, what+": fenced "+op, r, leasehold.CodeStaleToken)
		}
	}
	if accepted && check != nil {
		t.Fatalf("%s: CheckFenceTarget: %v", what, check)
	}
	if !accepted && leasehold.CodeOf(check) != leasehold.CodeStaleToken {
		t.Fatalf("%s: CheckFenceTarget = %v, want a stale token", what, check)
	}
}

// A partition's epoch fences KV writes while its owner has it, also while
// it is being revoked; after the hand-over the old epoch is stale and the
// new owner's accepted.
func TestPartitionEpochFencesKV(t *testing.T) {
	h := newHarness(t)
	if r := h.one(&GroupCreate{Group: "g", Partitions: 2}); r.Err != nil {
		t.Fatal(r.Err)
	}
	a := h.one(join("g", "a"))
	if a.Err != nil {
		t.Fatal(a.Err)
	}
	before, _ := h.s.Group("g")
	old := before.Partitions[1].Epoch
	fence := func(p uint32, epoch uint64) leasehold.Fence {
		return leasehold.Fence{Group: "g", Partition: p, Token: epoch}
	}
	wantFence(t, h, "owned", fence(1, old), true)
	wantFence(t, h, "another partition's epoch", fence(0, old), before.Partitions[0].Epoch == old)
	wantFence(t, h, "a future epoch", fence(1, old+1000), false)

	if r := h.one(join("g", "b")); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := owners(h.s, "g"); got[1] != "a*" {
		t.Fatalf("after b joined: %q, want partition 1 revoking from a", got)
	}
	wantFence(t, h, "revoking", fence(1, old), true)

	if r := h.one(ack("g", "a", a.Lease.ID, 1, old)); r.Err != nil {
		t.Fatal(r.Err)
	}
	after, _ := h.s.Group("g")
	if after.Partitions[1].Owner != "b" {
		t.Fatalf("partition 1 after the ack: %+v", after.Partitions[1])
	}
	wantFence(t, h, "handed over", fence(1, old), false)
	wantFence(t, h, "new owner", fence(1, after.Partitions[1].Epoch), true)

	// Targets that do not exist refuse as stale, like a resource no lease
	// holds: the write must not land, and the caller has no authority.
	wantFence(t, h, "partition out of range", fence(2, after.Partitions[1].Epoch), false)
	wantFence(t, h, "unknown group", leasehold.Fence{Group: "nope", Token: old}, false)
	if r := h.one(&GroupDelete{Group: "g", Actor: "admin", Reason: "retired"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	wantFence(t, h, "deleted group", fence(1, after.Partitions[1].Epoch), false)
}

// A queue delivery's token fences KV writes while the delivery is in
// flight; after a redelivery (visibility ran out) or an ack it is stale.
func TestDeliveryTokenFencesKV(t *testing.T) {
	h := newHarness(t)
	if r := h.one(&QueueCreate{Queue: "q", Settings: QueueSettings{Visibility: time.Minute}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := h.one(&QueueSend{Queue: "q", Messages: []QueueMessage{{Key: "k", Body: []byte("1")}, {Key: "k", Body: []byte("2")}}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	receive := func() Delivery {
		t.Helper()
		r := h.one(&QueueReceive{Queue: "q", Max: 1})
		if r.Err != nil || len(r.Queue().Deliveries) != 1 || r.Queue().Deliveries[0].Key != "k" {
			t.Fatalf("receive: %v %+v", r.Err, r.Queue())
		}
		return r.Queue().Deliveries[0]
	}
	fence := func(key string, token uint64) leasehold.Fence {
		return leasehold.Fence{Queue: "q", Key: key, Token: token}
	}
	wantFence(t, h, "nothing in flight", fence("k", 1), false)
	first := receive()
	wantFence(t, h, "in flight", fence("k", first.Token), true)
	wantFence(t, h, "a key with nothing in flight", fence("other", first.Token), false)

	if r := h.one(&QueueExpire{Queue: "q", Seq: first.Sequence, Token: first.Token}); r.Err != nil {
		t.Fatal(r.Err)
	}
	wantFence(t, h, "visibility ran out", fence("k", first.Token), false)
	again := receive()
	if again.Sequence != first.Sequence || again.Token == first.Token {
		t.Fatalf("redelivery %+v of %+v", again, first)
	}
	wantFence(t, h, "redelivered, the old token", fence("k", first.Token), false)
	wantFence(t, h, "redelivered, the new token", fence("k", again.Token), true)

	if r := h.one(&QueueAck{Queue: "q", Seq: again.Sequence, Token: again.Token}); r.Err != nil {
		t.Fatal(r.Err)
	}
	wantFence(t, h, "acked", fence("k", again.Token), false)
	next := receive()
	wantFence(t, h, "the key's next message", fence("k", next.Token), true)
	wantFence(t, h, "the acked one's token", fence("k", again.Token), false)
	wantFence(t, h, "unknown queue", leasehold.Fence{Queue: "nope", Key: "k", Token: next.Token}, false)
}

// Resource fences are written as they were before fences had targets (the
// bool 1, then resource and token), and the two new targets have their
// bytes pinned in testdata/fence-targets-v3.log.hex (and as batch version
// 2 wrote them, fence-targets-v2.log.hex); an older node reads the former,
// and a newer one the latter.
func TestFenceTargetEncodingPinned(t *testing.T) {
	old := (&Batch{Time: t0, Cmds: []Command{&Put{Key: "k", Fence: &leasehold.Fence{Resource: "r", Token: 5}}}}).Encode(nil)
	if !bytes.Contains(old, []byte("\x01\x01r\x05")) {
		t.Fatalf("a resource fence is no longer written as before: %x", old)
	}
	batches := []*Batch{{Time: t0, Cmds: []Command{
		&Put{RequestID: "f1", Key: "k", Value: []byte("v"), Caller: "svc", Fence: &leasehold.Fence{Group: "shards", Partition: 3, Token: 66}},
		&Delete{RequestID: "f2", Key: "k", Caller: "svc", Fence: &leasehold.Fence{Queue: "jobs", Key: "a", Token: 57}},
		&Txn{RequestID: "f3", Caller: "svc", Fence: &leasehold.Fence{Group: "shards", Token: 1},
			Then: []TxnOp{{Key: "k", Value: []byte("w")}}},
	}}}
	const path = "testdata/fence-targets-v3.log.hex"
	entries, rewritten := pinLog(t, batches, path, "testdata/fence-targets-v2.log.hex")
	if rewritten {
		t.Skip("fixture rewritten")
	}
	for _, raw := range entries {
		b, err := DecodeBatch(raw)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if f := b.Cmds[0].(*Put).Fence; f.Group != "shards" || f.Partition != 3 || f.Token != 66 {
			t.Fatalf("decoded fence %+v", f)
		}
	}
}
