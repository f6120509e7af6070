package fsm

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// logged applies c as a node does: through its log encoding.
func (q *queueRig) logged(c Command) Result {
	q.t.Helper()
	b, err := DecodeBatch((&Batch{Time: q.now + int64(time.Second), Cmds: []Command{c}}).Encode(nil))
	if err != nil {
		q.t.Fatal(err)
	}
	q.ix++
	q.now += int64(time.Second)
	return q.s.Apply(q.ix, b)[0]
}

// restart replaces the state by its snapshot, restored.
func (q *queueRig) restart() {
	q.t.Helper()
	s, err := Restore(q.s.Snapshot(), DefaultConfig(), nil)
	if err != nil {
		q.t.Fatal(err)
	}
	q.s = s
}

func (q *queueRig) depth(name string) (depth, dead int) {
	q.t.Helper()
	info, ok := q.s.Queue(name)
	if !ok {
		q.t.Fatalf("queue %q is gone", name)
	}
	return info.Depth, info.Dead
}

// A Purge, Redrive, Create, Delete and Nack retried with their request ID
// (through the log, and again after a snapshot restore) are answered as
// the first attempt was and act no more: what was sent or died between
// the attempts stays, and the counts and existed flag are the first's.
func TestQueueCommandsRetriedWithARequestIDActOnce(t *testing.T) {
	q := newQueueRig(t, DefaultConfig(), nil)
	create := &QueueCreate{Queue: "q", Settings: QueueSettings{MaxReceives: 1}, Caller: "alice", RequestID: "c1"}
	for i := range 2 {
		r := q.logged(create)
		if r.Err != nil || r.Queue() == nil || r.Queue().Existed || r.Dup != (i == 1) {
			t.Fatalf("create attempt %d: %+v, want the queue created (existed false)", i+1, r)
		}
	}
	if r := q.ok(&QueueCreate{Queue: "q", Settings: QueueSettings{MaxReceives: 1}}); !r.Queue().Existed {
		t.Fatal("another create of the same queue is not answered existed")
	}

	q.send("q", "a", "a1", "b", "b1")
	purge := &QueuePurge{Queue: "q", Actor: "alice", Reason: "test", RequestID: "p1"}
	if r := q.logged(purge); r.Err != nil || r.Queue().Moved != 2 {
		t.Fatalf("purge: %+v, want 2 dropped", r)
	}
	q.send("q", "c", "c1") // sent between the attempts
	for _, restart := range []bool{false, true} {
		if restart {
			q.restart()
		}
		if r := q.logged(purge); r.Err != nil || !r.Dup || r.Queue() == nil || r.Queue().Moved != 2 {
			t.Fatalf("retried purge (restored %v): %+v, want the first answer, 2 dropped", restart, r)
		}
		if depth, _ := q.depth("q"); depth != 1 {
			t.Fatalf("retried purge (restored %v) left depth %d; want c1 kept", restart, depth)
		}
	}

	d := q.receive("q", 1)[0]
	q.ok(&QueueNack{Queue: "q", Seq: d.Sequence, Token: d.Token}) // its one receive used: dead
	redrive := &QueueRedrive{Queue: "q", Actor: "alice", RequestID: "r1"}
	if r := q.logged(redrive); r.Err != nil || r.Queue().Moved != 1 {
		t.Fatalf("redrive: %+v, want 1 moved", r)
	}
	d = q.receive("q", 1)[0]
	q.ok(&QueueNack{Queue: "q", Seq: d.Sequence, Token: d.Token}) // dead again, after the first redrive
	for _, restart := range []bool{false, true} {
		if restart {
			q.restart()
		}
		if r := q.logged(redrive); r.Err != nil || !r.Dup || r.Queue() == nil || r.Queue().Moved != 1 {
			t.Fatalf("retried redrive (restored %v): %+v, want the first answer, 1 moved", restart, r)
		}
		if _, dead := q.depth("q"); dead != 1 {
			t.Fatalf("retried redrive (restored %v) left %d dead; want the one that died since", restart, dead)
		}
	}
	q.ok(&QueueRedrive{Queue: "q"})

	d = q.ok(&QueueReceive{Queue: "q", Max: 1, Caller: "alice/w1"}).Queue().Deliveries[0]
	nack := &QueueNack{Queue: "q", Seq: d.Sequence, Token: d.Token, Delay: time.Hour, Settler: Settler{Consumer: "alice/w1", Bound: true},
		RequestID: "n1"}
	q.ok(nack)
	if r := q.logged(nack); r.Err != nil || !r.Dup {
		t.Fatalf("retried nack: %+v, want the first answer", r)
	}

	if r := q.logged(&QueuePurge{Queue: "other", Actor: "alice", Reason: "test", RequestID: "p1"}); leasehold.CodeOf(r.Err) != leasehold.CodeInvalid {
		t.Fatalf("request id p1 reused for a purge of another queue: %v, want invalid", r.Err)
	}

	del := &QueueDelete{Queue: "q", Actor: "alice", Reason: "done", RequestID: "d1"}
	q.logged(del)
	q.restart()
	if r := q.logged(del); r.Err != nil || !r.Dup {
		t.Fatalf("retried delete: %v, want the first answer, not not_found", r.Err)
	}
	if r := q.logged(&QueueDelete{Queue: "q", Actor: "alice", Reason: "done"}); leasehold.CodeOf(r.Err) != leasehold.CodeNotFound {
		t.Fatalf("a delete without a request id of the deleted queue: %v, want not found", r.Err)
	}
}

// A request ID is scoped to its caller: another caller's Purge or Redrive
// that happens to reuse it (ids collide across callers) acts on its own,
// and is not answered from the first caller's record.
func TestQueueRequestIDsOfTwoCallersDoNotCollide(t *testing.T) {
	q := newQueueRig(t, DefaultConfig(), nil)
	q.ok(&QueueCreate{Queue: "q", Settings: QueueSettings{MaxReceives: 1}})
	q.send("q", "a", "a1", "b", "b1")
	if r := q.logged(&QueuePurge{Queue: "q", Actor: "alice", Reason: "test", RequestID: "same"}); r.Err != nil || r.Queue().Moved != 2 {
		t.Fatalf("alice's purge: %+v, want 2 dropped", r)
	}
	q.send("q", "c", "c1")
	if r := q.logged(&QueuePurge{Queue: "q", Actor: "bob", Reason: "test", RequestID: "same"}); r.Err != nil || r.Dup || r.Queue().Moved != 1 {
		t.Fatalf("bob's purge with alice's request id: %+v, want his own, c1 dropped", r)
	}
	if depth, _ := q.depth("q"); depth != 0 {
		t.Fatalf("depth %d after bob's purge, want 0", depth)
	}
	q.send("q", "d", "d1")
	d := q.receive("q", 1)[0]
	q.ok(&QueueNack{Queue: "q", Seq: d.Sequence, Token: d.Token}) // its one receive used: dead
	if r := q.logged(&QueueRedrive{Queue: "q", Actor: "alice", RequestID: "again"}); r.Err != nil || r.Queue().Moved != 1 {
		t.Fatalf("alice's redrive: %+v, want 1 moved", r)
	}
	d = q.receive("q", 1)[0]
	q.ok(&QueueNack{Queue: "q", Seq: d.Sequence, Token: d.Token})
	if r := q.logged(&QueueRedrive{Queue: "q", Actor: "bob", RequestID: "again"}); r.Err != nil || r.Dup || r.Queue().Moved != 1 {
		t.Fatalf("bob's redrive with alice's request id: %+v, want his own, 1 moved", r)
	}
	if _, dead := q.depth("q"); dead != 0 {
		t.Fatalf("%d dead after bob's redrive, want 0", dead)
	}
}

// Entries of the old kinds (no request ID) are applied as before: a
// second Purge drops what came since, a second Nack is stale.
func TestQueueCommandsWithoutARequestIDActAgain(t *testing.T) {
	q := newQueueRig(t, DefaultConfig(), nil)
	q.ok(&QueueCreate{Queue: "q"})
	q.send("q", "a", "a1")
	purge := &QueuePurge{Queue: "q", Actor: "alice", Reason: "test"}
	q.logged(purge)
	q.send("q", "b", "b1")
	if r := q.logged(purge); r.Err != nil || r.Queue().Moved != 1 {
		t.Fatalf("a second purge of the old kind: %+v, want b1 dropped", r)
	}
	q.send("q", "c", "c1")
	d := q.ok(&QueueReceive{Queue: "q", Max: 1, Caller: "alice/w1"}).Queue().Deliveries[0]
	nack := &QueueNack{Queue: "q", Seq: d.Sequence, Token: d.Token, Settler: Settler{Consumer: "alice/w1", Bound: true}}
	q.logged(nack)
	if r := q.logged(nack); leasehold.CodeOf(r.Err) != leasehold.CodeStaleToken {
		t.Fatalf("a second nack of the old kind: %v, want stale token", r.Err)
	}
}

// BenchmarkQueueNackRequestID is a Receive and a Nack of one message, with
// and without the Nack's request ID, on a queue holding 1,000 keys; the
// retained bytes per op are what the dedup window keeps of each Nack.
//
//	go test -run '^$' -bench BenchmarkQueueNackRequestID -benchtime 100000x -count 3 ./fsm
func BenchmarkQueueNackRequestID(b *testing.B) {
	for _, withID := range []bool{false, true} {
		b.Run(map[bool]string{false: "without", true: "with"}[withID], func(b *testing.B) {
			s := New(DefaultConfig(), nil)
			ix, now := uint64(1), t0
			s.Apply(ix, &Batch{Time: now, Cmds: []Command{&QueueCreate{Queue: "q", Settings: QueueSettings{MaxReceives: 1000}}}})
			for i := range 1000 {
				ix++
				s.Apply(ix, &Batch{Time: now, Cmds: []Command{&QueueSend{Queue: "q",
					Messages: []QueueMessage{{Key: fmt.Sprintf("k%d", i), Body: make([]byte, 200)}}}}})
			}
			by := Settler{Consumer: "svc/w1", Bound: true}
			recv := &QueueReceive{Queue: "q", Max: 1, Visibility: time.Minute, Caller: "svc/w1"}
			batch := &Batch{Time: now, Cmds: make([]Command, 1)}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			i := 0
			for b.Loop() {
				ix++
				batch.Cmds[0] = recv
				d := s.Apply(ix, batch)[0].Queue().Deliveries[0]
				ix++
				nack := &QueueNack{Queue: "q", Seq: d.Sequence, Token: d.Token, Settler: by}
				if withID {
					nack.RequestID = "nack-" + strconv.Itoa(i)
				}
				batch.Cmds[0] = nack
				if r := s.Apply(ix, batch)[0]; r.Err != nil {
					b.Fatal(r.Err)
				}
				i++
			}
			b.StopTimer()
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(b.N), "retained-B/op")
			runtime.KeepAlive(s)
		})
	}
}
