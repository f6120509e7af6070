package fsm

import (
	"slices"
	"testing"
)

// deliveredCount counts the leader's countdown (re)starts per token.
type deliveredCount struct {
	nopObserver
	starts map[uint64]int
}

func (o *deliveredCount) Arm(c Countdown) {
	if c.Key.Kind == CountdownVisibility {
		o.starts[c.Key.ID]++
	}
}
func (o *deliveredCount) Disarm(CountdownKey)              {}
func (o *deliveredCount) QueueReady(string)                {}
func (o *deliveredCount) QueueDeadLettered(string, uint64) {}

func seqTokens(ds []Delivery) [][2]uint64 {
	out := make([][2]uint64, len(ds))
	for i, d := range ds {
		out[i] = [2]uint64{d.Sequence, d.Token}
	}
	slices.SortFunc(out, func(a, b [2]uint64) int { return int(a[0]) - int(b[0]) })
	return out
}

// A Receive retried with its request ID answers the deliveries the first
// handed out that are still in flight, with the same tokens, hands out
// nothing more (even with no room left for the consumer), restarts their
// visibility, and does so alike on a replica restored from a snapshot;
// once they all ended, the ID receives anew. Another consumer's Receive
// with the same ID is its own.
func TestQueueReceiveRetryAnswersTheSameDeliveries(t *testing.T) {
	o := &deliveredCount{starts: map[uint64]int{}}
	q := newQueueRig(t, DefaultConfig(), o)
	q.ok(&QueueCreate{Queue: "jobs", Settings: QueueSettings{MaxInFlightPerConsumer: 2}})
	q.send("jobs", "a", "a1", "b", "b1", "c", "c1", "d", "d1")
	rcv := &QueueReceive{Queue: "jobs", Max: 2, Caller: "alice/w1", RequestID: "r1"}
	first := q.ok(rcv)
	if len(first.Queue().Deliveries) != 2 || first.Dup {
		t.Fatalf("first receive: %+v", first)
	}
	restored, err := Restore(q.s.Snapshot(), DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*State{"live": q.s, "restored": restored} {
		again := applyAt(s, 100, rcv)
		if again.Err != nil || !again.Dup || !slices.Equal(seqTokens(again.Queue().Deliveries), seqTokens(first.Queue().Deliveries)) {
			t.Fatalf("%s: the retry answered %+v, want the first's deliveries %v", name, again, seqTokens(first.Queue().Deliveries))
		}
		if info, _ := s.Queue("jobs"); info.InFlight != 2 {
			t.Fatalf("%s: %d in flight after the retry, want 2", name, info.InFlight)
		}
	}
	for _, d := range first.Queue().Deliveries {
		if o.starts[d.Token] != 2 {
			t.Fatalf("the visibility of token %d started %d times, want twice (delivery and retry)", d.Token, o.starts[d.Token])
		}
	}
	other := q.ok(&QueueReceive{Queue: "jobs", Max: 2, Caller: "bob/w1", RequestID: "r1"})
	if len(other.Queue().Deliveries) != 2 || other.Dup {
		t.Fatalf("another consumer's receive with the same request ID: %+v, want two new deliveries", other)
	}
	d0 := first.Queue().Deliveries[0]
	q.ok(&QueueAck{RequestID: "k1", Queue: "jobs", Seq: d0.Sequence, Token: d0.Token, Settler: Settler{Consumer: "alice/w1", Bound: true}})
	if again := q.ok(rcv); !again.Dup || len(again.Queue().Deliveries) != 1 || again.Queue().Deliveries[0].Sequence != first.Queue().Deliveries[1].Sequence {
		t.Fatalf("a retry after one was acked: %+v, want the other alone", again)
	}
	d1 := first.Queue().Deliveries[1]
	q.ok(&QueueNack{Queue: "jobs", Seq: d1.Sequence, Token: d1.Token, Settler: Settler{Consumer: "alice/w1", Bound: true}})
	if again := q.ok(rcv); again.Dup || len(again.Queue().Deliveries) != 1 || again.Queue().Deliveries[0].Token == d1.Token {
		t.Fatalf("a retry after all ended: %+v, want a new receive (the nacked message, a new token)", again)
	}
	if n := len(q.s.queues.byName.at("jobs").receipts); n != 2 {
		t.Fatalf("%d receipts kept, want 2 (bob's and alice's last)", n)
	}
}
