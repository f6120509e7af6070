package fsm

import (
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// A bound Ack, Nack or Extend from a consumer other than the delivery's
// is refused with CodePermission and changes nothing; the delivery's own
// consumer settles it. An unbound one (an entry of the old kinds) is
// applied as it always was.
func TestQueueSettleIsBoundToTheConsumer(t *testing.T) {
	q := newQueueRig(t, DefaultConfig(), nil)
	q.ok(&QueueCreate{Queue: "jobs"})
	q.send("jobs", "a", "a1", "b", "b1", "c", "c1")
	d := q.ok(&QueueReceive{Queue: "jobs", Max: 3, Caller: "alice/w1"}).Queue().Deliveries
	if len(d) != 3 {
		t.Fatalf("received %d, want 3", len(d))
	}
	mallory := Settler{Consumer: "mallory/w1", Bound: true}
	sameCallerOtherName := Settler{Consumer: "alice/w2", Bound: true}
	for _, by := range []Settler{mallory, sameCallerOtherName} {
		for name, c := range map[string]Command{
			"ack":    &QueueAck{RequestID: "x-" + by.Consumer, Queue: "jobs", Seq: d[0].Sequence, Token: d[0].Token, Caller: "mallory", Settler: by},
			"nack":   &QueueNack{Queue: "jobs", Seq: d[0].Sequence, Token: d[0].Token, Settler: by},
			"extend": &QueueExtend{Queue: "jobs", Seq: d[0].Sequence, Token: d[0].Token, Visibility: time.Hour, Settler: by},
		} {
			r := q.apply(c)
			if leasehold.CodeOf(r.Err) != leasehold.CodePermission || !strings.Contains(r.Err.Error(), "another consumer") {
				t.Fatalf("%s by %s: %v, want permission denied naming another consumer", name, by.Consumer, r.Err)
			}
		}
	}
	if info, _ := q.s.Queue("jobs"); info.InFlight != 3 || info.Depth != 3 {
		t.Fatalf("refused settlements changed the queue: %+v", info)
	}
	own := Settler{Consumer: "alice/w1", Bound: true}
	q.ok(&QueueExtend{Queue: "jobs", Seq: d[0].Sequence, Token: d[0].Token, Visibility: time.Hour, Settler: own})
	q.ok(&QueueNack{Queue: "jobs", Seq: d[1].Sequence, Token: d[1].Token, Settler: own})
	q.ok(&QueueAck{RequestID: "own", Queue: "jobs", Seq: d[0].Sequence, Token: d[0].Token, Caller: "alice", Settler: own})
	// An old-kind entry names no consumer and is applied as before.
	q.ok(&QueueAck{RequestID: "legacy", Queue: "jobs", Seq: d[2].Sequence, Token: d[2].Token, Caller: "bob"})
	if info, _ := q.s.Queue("jobs"); info.InFlight != 0 || info.Depth != 1 {
		t.Fatalf("after the consumer's own settlements: %+v, want b1 queued alone", info)
	}
}

// The bound kinds' bytes are pinned in testdata/queue-settle-v3.log.hex
// (as batch version 2 wrote them, queue-settle-v2.log.hex; the old kinds'
// stay pinned in current-v3.log.hex): a node reads what an older one of
// this version wrote.
func TestQueueSettleEncodingPinned(t *testing.T) {
	by := Settler{Consumer: "alice/w1", Bound: true}
	batches := []*Batch{{Time: t0, Cmds: []Command{
		&QueueAck{RequestID: "a1", Queue: "jobs", Seq: 1, Token: 55, Caller: "alice", Settler: by},
		&QueueNack{Queue: "jobs", Seq: 2, Token: 56, Delay: time.Second, Note: "db down", Settler: by},
		&QueueExtend{Queue: "jobs", Seq: 3, Token: 57, Visibility: time.Minute, Progress: "half", Settler: by},
		&QueueAck{RequestID: "a2", Queue: "jobs", Seq: 4, Token: 58, Settler: Settler{Bound: true}},
	}}}
	const path = "testdata/queue-settle-v3.log.hex"
	entries, rewritten := pinLog(t, batches, path, "testdata/queue-settle-v2.log.hex")
	if rewritten {
		t.Skip("fixture rewritten")
	}
	b, err := DecodeBatch(entries[0])
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	wantKinds := []Kind{KindQueueAckBy, KindQueueNackBy, KindQueueExtendBy, KindQueueAckBy}
	for i, c := range b.Cmds {
		if c.Kind() != wantKinds[i] {
			t.Fatalf("command %d decoded as %v, want %v", i, c.Kind(), wantKinds[i])
		}
	}
	if a := b.Cmds[0].(*QueueAck); a.Settler != by || a.Caller != "alice" || a.Token != 55 {
		t.Fatalf("decoded %+v", a)
	}
	if a := b.Cmds[3].(*QueueAck); !a.Bound || a.Consumer != "" {
		t.Fatalf("a bound ack with no consumer name decoded as %+v", a)
	}
}
