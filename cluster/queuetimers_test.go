package cluster

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/fsm"
)

func queueNode(t *testing.T, fake *clock.Fake, set fsm.QueueSettings) *Node {
	t.Helper()
	cfg := testConfig(t, t.TempDir())
	cfg.Clock = fake
	n := openNode(t, cfg)
	t.Cleanup(func() { n.Close() })
	mustPropose(t, n, &fsm.QueueCreate{Queue: "q", Settings: set})
	return n
}

func mustPropose(t *testing.T, n *Node, c fsm.Command) fsm.Result {
	t.Helper()
	r, err := n.Propose(context.Background(), c)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		t.Fatalf("%T: %v", c, err)
	}
	return r
}

func queueInfo(n *Node) fsm.QueueInfo {
	var q fsm.QueueInfo
	n.ReadLocal(func(st *fsm.State) { q, _ = st.Queue("q") })
	return q
}

// waitQueue polls (the proposal a timer fired is applied on its own
// goroutine) until ok holds of the queue, for at most 5s.
func waitQueue(t *testing.T, n *Node, what string, ok func(fsm.QueueInfo) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok(queueInfo(n)) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the queue is %+v", what, queueInfo(n))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A delivery's visibility runs on the node's clock: an hour's visibility
// holds for 59 minutes and expires after 61, without the test sleeping.
func TestQueueVisibilityFollowsTheNodeClock(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	n := queueNode(t, fake, fsm.QueueSettings{})
	mustPropose(t, n, &fsm.QueueSend{Queue: "q", Messages: []fsm.QueueMessage{{Key: "k", Body: []byte("m")}}})
	d := mustPropose(t, n, &fsm.QueueReceive{Queue: "q", Max: 1, Visibility: time.Hour}).Queue().Deliveries[0]
	fake.Advance(59 * time.Minute)
	time.Sleep(50 * time.Millisecond) // time for a wrongly fired expiry to apply
	if q := queueInfo(n); q.InFlight != 1 {
		t.Fatalf("the delivery ended before its visibility on the node's clock: %+v", q)
	}
	fake.Advance(2 * time.Minute)
	waitQueue(t, n, "the visibility ran out", func(q fsm.QueueInfo) bool { return q.InFlight == 0 })
	again := mustPropose(t, n, &fsm.QueueReceive{Queue: "q", Max: 1}).Queue().Deliveries
	if len(again) != 1 || again[0].Sequence != d.Sequence || again[0].Token <= d.Token {
		t.Fatalf("redelivery %+v, want sequence %d with a token above %d", again, d.Sequence, d.Token)
	}
}

// The leader retires a queue's messages once they are older than its
// retention (checked every minute), and not those younger.
func TestQueueRetireFollowsRetention(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	n := queueNode(t, fake, fsm.QueueSettings{Retention: time.Minute})
	send := func(body string) {
		mustPropose(t, n, &fsm.QueueSend{Queue: "q", Messages: []fsm.QueueMessage{{Key: body, Body: []byte(body)}}})
	}
	send("old")
	fake.Advance(50 * time.Second)
	send("young")
	fake.Advance(11 * time.Second) // the check at 1m: "old" is 61s old, "young" 11s
	waitQueue(t, n, "the old message retired", func(q fsm.QueueInfo) bool { return q.Depth == 1 })
	left := mustPropose(t, n, &fsm.QueueReceive{Queue: "q", Max: 10}).Queue().Deliveries
	if len(left) != 1 || string(left[0].Body) != "young" {
		t.Fatalf("left after retirement: %+v, want only the young message", left)
	}
}

// The leader's minute check also retires dedup ids past their window on
// a queue nobody sends to.
func TestQueueRetireForgetsDedupIDs(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	n := queueNode(t, fake, fsm.QueueSettings{DedupWindow: 10 * time.Second})
	mustPropose(t, n, &fsm.QueueSend{Queue: "q", Messages: []fsm.QueueMessage{{Key: "k", DedupID: "d"}}})
	r := mustPropose(t, n, &fsm.QueueReceive{Queue: "q", Max: 1})
	mustPropose(t, n, &fsm.QueueAck{Queue: "q", Seq: r.Queue().Deliveries[0].Sequence, Token: r.Queue().Deliveries[0].Token})
	fake.Advance(61 * time.Second)
	waitQueue(t, n, "the dedup id was forgotten", func(q fsm.QueueInfo) bool { return q.DedupIDs == 0 })
}

// A delivery extended again and again keeps one countdown, and the
// heap stays one entry; it still fires.
func TestQueueVisibilityHeapStaysBounded(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	tm := newTimers(fake, slog.New(slog.DiscardHandler))
	tm.active = true
	vis := fsm.Countdown{Key: fsm.CountdownKey{Kind: fsm.CountdownVisibility, Name: "q", ID: 7}, After: time.Hour,
		Fire: &fsm.QueueExpire{Queue: "q", Seq: 1, Token: 7}}
	for range 10000 { // an extension a second, for nearly 3 hours
		tm.arm(vis)
		fake.Advance(time.Second)
	}
	tm.mu.Lock()
	n := len(tm.cd.due)
	tm.mu.Unlock()
	if n != 1 {
		t.Fatalf("the heap holds %d deadlines for one delivery", n)
	}
	fake.Advance(time.Hour)
	cmds := tm.take()
	if len(cmds) != 1 {
		t.Fatalf("after the last extension's hour: %d expiries proposed, want 1: %v", len(cmds), cmds)
	}
}
