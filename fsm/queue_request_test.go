package fsm

import (
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// requestID is a dedup id as the node makes it from a request ID
// (server.requestDedupID): the request's part, then the message's
// fingerprint.
func requestID(part, fp byte) string {
	return "\x00" + strings.Repeat(string('a'+part%6), 32) + ":" + strings.Repeat(string('0'+fp%10), 16)
}

// A request ID reused for another message (same request part, another
// fingerprint) is refused with CodeInvalid and enqueues nothing, on the
// state that saw the first and on one restored from its snapshot (every
// replica alike); a true retry is a duplicate; past the dedup window the
// request ID is free again.
func TestQueueSendRefusesAReusedRequestID(t *testing.T) {
	q := newQueueRig(t, DefaultConfig(), nil)
	set := DefaultQueueSettings()
	set.DedupWindow = time.Minute
	q.ok(&QueueCreate{Queue: "q", Settings: set})
	send := func(s *State, ix uint64, id string) Result {
		return applyAt(s, ix, &QueueSend{Queue: "q", Messages: []QueueMessage{{Key: "k", Body: []byte("b"), DedupID: id}}})
	}
	first := q.ok(&QueueSend{Queue: "q", Messages: []QueueMessage{{Key: "k", Body: []byte("b"), DedupID: requestID(1, 1)}}})
	restored, err := Restore(q.s.Snapshot(), DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*State{"live": q.s, "restored": restored} {
		if r := send(s, 10, requestID(1, 2)); leasehold.CodeOf(r.Err) != leasehold.CodeInvalid || r.Queue() != nil {
			t.Fatalf("%s: the request ID reused for another message: %+v, want invalid", name, r)
		}
		if r := send(s, 11, requestID(1, 1)); r.Err != nil || !r.Queue().Duplicate[0] || r.Queue().Seqs[0] != first.Queue().Seqs[0] {
			t.Fatalf("%s: a retry: %+v, want the first sequence as a duplicate", name, r)
		}
		if r := send(s, 12, requestID(2, 2)); r.Err != nil || r.Queue().Duplicate[0] {
			t.Fatalf("%s: another request ID: %+v, want a new message", name, r)
		}
		if info, _ := s.Queue("q"); info.Depth != 2 {
			t.Fatalf("%s: depth %d, want 2", name, info.Depth)
		}
	}
	// Past the window the first is forgotten: the request ID is new again.
	q.now += int64(2 * time.Minute)
	if r := q.apply(&QueueSend{Queue: "q", Messages: []QueueMessage{{Key: "k", Body: []byte("c"), DedupID: requestID(1, 3)}}}); r.Err != nil || r.Queue().Duplicate[0] {
		t.Fatalf("past the dedup window: %+v, want a new message", r)
	}
}

// An Ack's request ID is scoped to its caller and fingerprinted: reused by
// the same caller for another delivery it is refused with CodeInvalid
// (saying nothing of the first), and another caller's equal ID is its own.
func TestQueueAckRequestIDIsScopedAndFingerprinted(t *testing.T) {
	q := newQueueRig(t, DefaultConfig(), nil)
	q.ok(&QueueCreate{Queue: "q"})
	q.send("q", "a", "a1", "b", "b1", "c", "c1")
	ds := q.receive("q", 3)
	q.ok(&QueueAck{RequestID: "ack", Queue: "q", Seq: ds[0].Sequence, Token: ds[0].Token, Caller: "w1"})
	r := q.apply(&QueueAck{RequestID: "ack", Queue: "q", Seq: ds[1].Sequence, Token: ds[1].Token, Caller: "w1"})
	if leasehold.CodeOf(r.Err) != leasehold.CodeInvalid || strings.Contains(r.Err.Error(), "a1") {
		t.Fatalf("the ack's request ID reused for another delivery: %+v, want invalid", r)
	}
	if info, _ := q.s.Queue("q"); info.InFlight != 2 {
		t.Fatalf("in flight %d after the refused ack, want 2", info.InFlight)
	}
	if r := q.apply(&QueueAck{RequestID: "ack", Queue: "q", Seq: ds[2].Sequence, Token: ds[2].Token, Caller: "w2"}); r.Err != nil || r.Dup {
		t.Fatalf("another caller's ack with the same request ID: %+v, want its own ack", r)
	}
}
