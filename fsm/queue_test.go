package fsm

import (
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// queueRig applies queue commands one entry at a time, a second apart.
type queueRig struct {
	t   *testing.T
	s   *State
	ix  uint64
	now int64
}

func newQueueRig(t *testing.T, cfg Config, obs Observer) *queueRig {
	return &queueRig{t: t, s: New(cfg, obs), now: t0}
}

func (q *queueRig) apply(c Command) Result {
	q.ix++
	q.now += int64(time.Second)
	return q.s.Apply(q.ix, &Batch{Time: q.now, Cmds: []Command{c}})[0]
}

func (q *queueRig) ok(c Command) Result {
	q.t.Helper()
	r := q.apply(c)
	if r.Err != nil {
		q.t.Fatalf("%T: %v", c, r.Err)
	}
	return r
}

func (q *queueRig) send(queue string, keyBodies ...string) []uint64 {
	q.t.Helper()
	c := &QueueSend{Queue: queue}
	for i := 0; i < len(keyBodies); i += 2 {
		c.Messages = append(c.Messages, QueueMessage{Key: keyBodies[i], Body: []byte(keyBodies[i+1])})
	}
	return q.ok(c).Queue().Seqs
}

func (q *queueRig) receive(queue string, max int) []Delivery {
	q.t.Helper()
	return q.ok(&QueueReceive{Queue: queue, Max: max}).Queue().Deliveries
}

func bodies(ds []Delivery) string {
	var b []string
	for _, d := range ds {
		b = append(b, string(d.Body))
	}
	return strings.Join(b, ",")
}

// Each limit refuses a send with the limit error naming it, and leaves
// what was accepted in place.
func TestQueueBackpressureNamesTheLimit(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxQueueBytes = 25
	cfg.MaxQueueDedupIDs = 1
	q := newQueueRig(t, cfg, nil)
	q.ok(&QueueCreate{Queue: "deep", Settings: QueueSettings{MaxDepth: 2}})
	q.ok(&QueueCreate{Queue: "ids"})
	q.ok(&QueueSend{Queue: "ids", Messages: []QueueMessage{{Key: "a", DedupID: "d1"}}})
	q.ok(&QueueCreate{Queue: "fat", Settings: QueueSettings{MaxBytes: 10}})
	q.ok(&QueueCreate{Queue: "other"})
	q.send("deep", "a", "1", "b", "2")
	q.send("fat", "a", "123456789")
	q.send("other", "a", "0123456789")
	for _, tc := range []struct {
		queue, body, limit string
	}{
		{"deep", "3", "max_depth 2"},
		{"fat", "12", "max_bytes 10"},
		{"other", "0123456789", "max_queue_bytes 25"},
		{"ids", "", "max_queue_dedup_ids 1"},
	} {
		r := q.apply(&QueueSend{Queue: tc.queue, Messages: []QueueMessage{{Key: "z", Body: []byte(tc.body), DedupID: "d2"}}})
		if leasehold.CodeOf(r.Err) != leasehold.CodeLimit || !strings.Contains(r.Err.Error(), tc.limit) {
			t.Fatalf("send to %s: %v, want the limit error naming %q", tc.queue, r.Err, tc.limit)
		}
	}
	if got := bodies(q.receive("deep", 10)); got != "1,2" {
		t.Fatalf("queue deep delivers %q after the refusal, want 1,2", got)
	}
	if q.s.QueueBytes() != 2+9+10 {
		t.Fatalf("the queues hold %d bytes, want 21", q.s.QueueBytes())
	}
}

// With the default (skip), a message that used its receives goes to the
// dead letters with its key, body, receive count and last error, and its
// key moves on; with block, the key waits until the dead letter is
// redriven, which puts it back at the key's head.
func TestQueueDeadLetterModes(t *testing.T) {
	for _, tc := range []struct {
		mode                DeadLetterMode
		afterDeath, redrive string
	}{
		{0, "a2", "a1"},             // the default skips
		{DeadLetterBlock, "", "a1"}, // blocked until the redrive
	} {
		q := newQueueRig(t, DefaultConfig(), nil)
		q.ok(&QueueCreate{Queue: "q", Settings: QueueSettings{MaxReceives: 2, DeadLetter: tc.mode}})
		q.send("q", "a", "a1", "a", "a2")
		d := q.receive("q", 1)[0]
		q.ok(&QueueNack{Queue: "q", Seq: d.Sequence, Token: d.Token, Note: "db down"})
		d = q.receive("q", 1)[0]
		q.ok(&QueueExpire{Queue: "q", Seq: d.Sequence, Token: d.Token})
		dead := q.s.DeadLetters("q", 0)
		if len(dead) != 1 || dead[0].Key != "a" || string(dead[0].Body) != "a1" || dead[0].Receives != 2 || dead[0].Note != "db down" {
			t.Fatalf("mode %d: dead letters %+v, want a1 of key a after 2 receives noting db down", tc.mode, dead)
		}
		next := q.receive("q", 1)
		if got := bodies(next); got != tc.afterDeath {
			t.Fatalf("mode %d: after the dead letter key a delivers %q, want %q", tc.mode, got, tc.afterDeath)
		}
		for _, d := range next {
			q.ok(&QueueAck{Queue: "q", Seq: d.Sequence, Token: d.Token})
		}
		if r := q.ok(&QueueRedrive{Queue: "q"}); r.Queue().Moved != 1 {
			t.Fatalf("mode %d: redrive moved %d", tc.mode, r.Queue().Moved)
		}
		if got := bodies(q.receive("q", 1)); got != tc.redrive {
			t.Fatalf("mode %d: after the redrive key a delivers %q, want %q", tc.mode, got, tc.redrive)
		}
	}
}

// A delayed message or a nack's backoff holds the key until its time
// (the entries' time); a nack returns the message to its key's head.
func TestQueueDelayAndNackBackoff(t *testing.T) {
	q := newQueueRig(t, DefaultConfig(), nil)
	q.ok(&QueueCreate{Queue: "q"})
	q.ok(&QueueSend{Queue: "q", Messages: []QueueMessage{{Key: "a", Body: []byte("a1"), Delay: 3 * time.Second}, {Key: "b", Body: []byte("b1")}}})
	if got := bodies(q.receive("q", 10)); got != "b1" {
		t.Fatalf("delivered %q before a1's delay, want b1", got)
	}
	if at, ok := q.s.NextReady("q"); !ok || at.UnixNano() != t0+5*int64(time.Second) {
		t.Fatalf("next ready at %v (%v), want the end of a1's delay, t0+5s (sent at t0+2s)", at, ok)
	}
	q.apply(&QueueExpire{Queue: "q"}) // time passes: a stale expiry does nothing
	d := q.receive("q", 10)
	if bodies(d) != "a1" {
		t.Fatalf("after its delay delivered %q, want a1", bodies(d))
	}
	q.ok(&QueueNack{Queue: "q", Seq: d[0].Sequence, Token: d[0].Token, Delay: 2 * time.Second})
	if got := bodies(q.receive("q", 10)); got != "" {
		t.Fatalf("delivered %q during the nack's backoff", got)
	}
	d2 := q.receive("q", 10)
	if bodies(d2) != "a1" || d2[0].Receives != 2 || d2[0].Token <= d[0].Token {
		t.Fatalf("redelivery %+v: want a1, receive 2, a token above %d", d2, d[0].Token)
	}
}

// A retried Ack with its request ID is answered from the dedup window,
// not refused as stale; another delivery's token is refused.
func TestQueueAckRetry(t *testing.T) {
	q := newQueueRig(t, DefaultConfig(), nil)
	q.ok(&QueueCreate{Queue: "q"})
	q.send("q", "a", "a1", "a", "a2")
	d := q.receive("q", 1)[0]
	ack := &QueueAck{RequestID: "ack-1", Queue: "q", Seq: d.Sequence, Token: d.Token, Caller: "w"}
	q.ok(ack)
	if r := q.apply(ack); r.Err != nil || !r.Dup {
		t.Fatalf("retried ack: %+v, want the first answer (dup)", r)
	}
	d2 := q.receive("q", 1)[0]
	r := q.apply(&QueueAck{RequestID: "ack-2", Queue: "q", Seq: d2.Sequence, Token: d.Token})
	if leasehold.CodeOf(r.Err) != leasehold.CodeStaleToken {
		t.Fatalf("ack with the previous delivery's token: %v, want stale token", r.Err)
	}
}

// Create is answered again for the same settings and refused for others
// or bad ones; purge keeps deliveries in flight; delete frees the bytes.
func TestQueueCreatePurgeDelete(t *testing.T) {
	q := newQueueRig(t, DefaultConfig(), nil)
	q.ok(&QueueCreate{Queue: "q", Settings: QueueSettings{MaxReceives: 3}})
	if r := q.ok(&QueueCreate{Queue: "q", Settings: QueueSettings{MaxReceives: 3}}); !r.Dup {
		t.Fatal("creating the same queue again is not answered as done")
	}
	if r := q.apply(&QueueCreate{Queue: "q", Settings: QueueSettings{MaxReceives: 4}}); leasehold.CodeOf(r.Err) != leasehold.CodeHeld {
		t.Fatalf("creating it with other settings: %v", r.Err)
	}
	if r := q.apply(&QueueCreate{Queue: "bad", Settings: QueueSettings{Visibility: time.Millisecond}}); leasehold.CodeOf(r.Err) != leasehold.CodeInvalid ||
		!strings.Contains(r.Err.Error(), "visibility") {
		t.Fatalf("a 1ms visibility: %v", r.Err)
	}
	if r := q.apply(&QueueSend{Queue: "nope", Messages: []QueueMessage{{Key: "a"}}}); leasehold.CodeOf(r.Err) != leasehold.CodeNotFound {
		t.Fatalf("send to a missing queue: %v", r.Err)
	}
	q.send("q", "a", "a1", "a", "a2", "b", "b1")
	d := q.receive("q", 1)[0]
	if r := q.ok(&QueuePurge{Queue: "q", Actor: "alice", Reason: "test"}); r.Queue().Moved != 2 {
		t.Fatalf("purge dropped %d, want 2", r.Queue().Moved)
	}
	q.ok(&QueueAck{Queue: "q", Seq: d.Sequence, Token: d.Token}) // in flight: kept
	if info, _ := q.s.Queue("q"); info.Depth != 0 || q.s.QueueBytes() != 0 {
		t.Fatalf("after purge and ack: %+v, %d bytes", info, q.s.QueueBytes())
	}
	q.send("q", "a", "a3")
	q.ok(&QueueDelete{Queue: "q", Actor: "alice"})
	if _, ok := q.s.Queue("q"); ok || q.s.QueueBytes() != 0 {
		t.Fatal("a deleted queue remains or keeps its bytes")
	}
	if got := q.s.audit[len(q.s.audit)-1]; got.Action != "queue-delete" || got.Actor != "alice" {
		t.Fatalf("audit: %+v", got)
	}
}

type queueTimers struct {
	nopObserver
	vis   map[uint64]time.Duration // by token
	wakes int
}

func (o *queueTimers) QueueReady(string) { o.wakes++ }

func (o *queueTimers) QueueDeadLettered(string, uint64) {}

func (o *queueTimers) Arm(c Countdown) {
	if c.Key.Kind == CountdownVisibility {
		o.vis[c.Key.ID] = c.After
	}
}
func (o *queueTimers) Disarm(k CountdownKey) {
	if k.Kind == CountdownVisibility {
		delete(o.vis, k.ID)
	}
}

// The leader's timers hear of each delivery and its end; an Extend
// restarts the countdown, and a new leader finds the extended visibility.
func TestQueueObserverTimesVisibility(t *testing.T) {
	o := &queueTimers{vis: map[uint64]time.Duration{}}
	q := newQueueRig(t, DefaultConfig(), o)
	q.ok(&QueueCreate{Queue: "q", Settings: QueueSettings{Visibility: 10 * time.Second}})
	q.send("q", "a", "a1", "b", "b1")
	if o.wakes != 1 {
		t.Fatalf("a send woke %d times, want once", o.wakes)
	}
	ds := q.ok(&QueueReceive{Queue: "q", Max: 2, Caller: "worker-1"}).Queue().Deliveries
	q.ok(&QueueExtend{Queue: "q", Seq: ds[0].Sequence, Token: ds[0].Token, Visibility: time.Minute})
	q.ok(&QueueAck{Queue: "q", Seq: ds[1].Sequence, Token: ds[1].Token})
	if o.wakes != 1 {
		t.Fatalf("an ack leaving nothing ready woke %d times", o.wakes-1)
	}
	want := map[uint64]time.Duration{ds[0].Token: time.Minute}
	if len(o.vis) != 1 || o.vis[ds[0].Token] != time.Minute {
		t.Fatalf("timers %v, want %v", o.vis, want)
	}
	restored, err := Restore(q.s.Snapshot(), DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]time.Duration{}
	restored.EachCountdown(func(c Countdown) {
		if c.Key.Kind == CountdownVisibility {
			got[c.Fire.(*QueueExpire).Token] = c.After
		}
	})
	if len(got) != 1 || got[ds[0].Token] != time.Minute {
		t.Fatalf("a new leader finds %v, want %v", got, want)
	}
	if f := restored.InFlight("q", 0); len(f) != 1 || f[0].Key != "a" || f[0].Consumer != "worker-1" {
		t.Fatalf("in flight after the restore: %+v, want key a held by worker-1", f)
	}
}

// A batch that repeats a dedup id enqueues it once and counts it once
// against max_depth: a send that fits is not refused.
func TestQueueBatchRepeatingDedupIDFits(t *testing.T) {
	q := newQueueRig(t, DefaultConfig(), nil)
	q.ok(&QueueCreate{Queue: "q", Settings: QueueSettings{MaxDepth: 1}})
	r := q.ok(&QueueSend{Queue: "q", Messages: []QueueMessage{{Key: "a", Body: []byte("x"), DedupID: "d"},
		{Key: "a", Body: []byte("x"), DedupID: "d"}}})
	if r.Queue().Seqs[0] != 1 || r.Queue().Seqs[1] != 1 || !r.Queue().Duplicate[1] {
		t.Fatalf("send answered %+v, want seq 1 twice, the second a duplicate", r.Queue())
	}
}

// A dedup id is remembered for the queue's window and then forgotten:
// inside it a repeat returns the first sequence, after it a send is new.
func TestQueueDedupWindow(t *testing.T) {
	q := newQueueRig(t, DefaultConfig(), nil)
	q.ok(&QueueCreate{Queue: "q", Settings: QueueSettings{DedupWindow: 2 * time.Second}})
	send := &QueueSend{Queue: "q", Messages: []QueueMessage{{Key: "a", DedupID: "d"}}}
	first := q.ok(send).Queue().Seqs[0]
	if r := q.ok(send); r.Queue().Seqs[0] != first || !r.Queue().Duplicate[0] { // 1s later
		t.Fatalf("a repeat inside the window: %+v, want seq %d as a duplicate", r.Queue(), first)
	}
	q.apply(&QueueExpire{Queue: "q"}) // 2s after the first: the window has passed
	if r := q.ok(send); r.Queue().Seqs[0] == first || r.Queue().Duplicate[0] {
		t.Fatalf("a send after the window: %+v, want a new sequence", r.Queue())
	}
	if info, _ := q.s.Queue("q"); info.Depth != 2 {
		t.Fatalf("depth %d, want 2", info.Depth)
	}
}

// A consumer's Receive is capped to what is left of its in-flight
// allowance and refused when none is left; another consumer is not
// held back, and an ack gives the room back. A restored state counts
// alike.
func TestQueueMaxInFlightPerConsumer(t *testing.T) {
	q := newQueueRig(t, DefaultConfig(), nil)
	q.ok(&QueueCreate{Queue: "q", Settings: QueueSettings{MaxInFlightPerConsumer: 2}})
	q.send("q", "a", "a1", "b", "b1", "c", "c1", "d", "d1")
	ds := q.ok(&QueueReceive{Queue: "q", Max: 3, Caller: "w1"}).Queue().Deliveries
	if len(ds) != 2 {
		t.Fatalf("a receive of 3 with room for 2 got %d", len(ds))
	}
	r := q.apply(&QueueReceive{Queue: "q", Max: 1, Caller: "w1"})
	if leasehold.CodeOf(r.Err) != leasehold.CodeLimit || !strings.Contains(r.Err.Error(), "max_in_flight_per_consumer 2") {
		t.Fatalf("a receive past the allowance: %v, want the limit error naming it", r.Err)
	}
	if got := q.ok(&QueueReceive{Queue: "q", Max: 1, Caller: "w2"}).Queue().Deliveries; len(got) != 1 {
		t.Fatalf("another consumer got %d, want 1", len(got))
	}
	restored, err := Restore(q.s.Snapshot(), DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	q.s = restored
	if r := q.apply(&QueueReceive{Queue: "q", Max: 1, Caller: "w1"}); leasehold.CodeOf(r.Err) != leasehold.CodeLimit {
		t.Fatalf("after a restore, a receive past the allowance: %v, want the limit error", r.Err)
	}
	q.ok(&QueueAck{Queue: "q", Seq: ds[0].Sequence, Token: ds[0].Token})
	if got := q.ok(&QueueReceive{Queue: "q", Max: 2, Caller: "w1"}).Queue().Deliveries; len(got) != 1 {
		t.Fatalf("after an ack, the consumer got %d, want 1", len(got))
	}
}

// The state takes bodies up to MaxQueueBody (the node's edge holds its
// configured, smaller limit), so a 256 KiB body is not refused here.
func TestQueueBodyCeiling(t *testing.T) {
	q := newQueueRig(t, DefaultConfig(), nil)
	q.ok(&QueueCreate{Queue: "q"})
	q.ok(&QueueSend{Queue: "q", Messages: []QueueMessage{{Key: "a", Body: make([]byte, 256<<10)}}})
	r := q.apply(&QueueSend{Queue: "q", Messages: []QueueMessage{{Key: "a", Body: make([]byte, MaxQueueBody+1)}}})
	if leasehold.CodeOf(r.Err) != leasehold.CodeInvalid {
		t.Fatalf("a body over the ceiling: %v, want invalid", r.Err)
	}
}

// A retirement also forgets the dedup ids past the window, so an idle
// queue does not keep them until its next send.
func TestQueueRetireForgetsDedupIDs(t *testing.T) {
	q := newQueueRig(t, DefaultConfig(), nil)
	q.ok(&QueueCreate{Queue: "q", Settings: QueueSettings{DedupWindow: 2 * time.Second}})
	q.ok(&QueueSend{Queue: "q", Messages: []QueueMessage{{Key: "a", DedupID: "d"}}})
	if info, _ := q.s.Queue("q"); info.DedupIDs != 1 || info.OldestDedupAt != nanosTime(q.now) {
		t.Fatalf("after a send: %d dedup ids, oldest %v", info.DedupIDs, info.OldestDedupAt)
	}
	q.ok(&QueueRetire{Queue: "q"}) // 1s later: inside the window
	if info, _ := q.s.Queue("q"); info.DedupIDs != 1 {
		t.Fatalf("a retirement inside the window forgot the id: %d left", info.DedupIDs)
	}
	q.ok(&QueueRetire{Queue: "q"}) // 2s after the send: past it
	if info, _ := q.s.Queue("q"); info.DedupIDs != 0 || !info.OldestDedupAt.IsZero() {
		t.Fatalf("a retirement past the window kept %d ids", info.DedupIDs)
	}
}
