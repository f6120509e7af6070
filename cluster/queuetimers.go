package cluster

import (
	"container/heap"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/fsm"
)

// visibility is the leader's countdown for queue deliveries: one heap of
// deadlines on the monotonic clock and one timer for the earliest, as for
// idempotency retention (a queue may have thousands of deliveries in
// flight). When a deadline passes, the leader proposes QueueExpire naming
// the delivery's token; the state machine ignores one that lost a race
// with an Ack, a Nack or a redelivery. An Extend re-arms the same token,
// so the live deadline of each delivery is kept in current and an older
// heap entry is skipped. A new leader restarts every countdown from its
// takeover with the delivery's full visibility: a delivery is never
// redelivered early. It is part of timers and guarded by timers.mu.
//
// retire is the leader's periodic QueueRetire: every retireEvery it
// proposes one for each queue holding messages past its retention or
// dedup ids past its window (which a send also drops).
type visibility struct {
	due     visHeap
	current map[delivered]visDue // by delivery: its live deadline
	timer   clock.Timer
	at      time.Time // when timer fires (zero: not armed)
	retire  *retireTicker
}

// retireTicker is one run of the periodic retirement; a tick re-arms
// only while its run is the current one (a restart starts another).
type retireTicker struct{ timer clock.Timer }

type delivered struct {
	queue string
	seq   uint64
}

type visDue struct {
	at    time.Time
	token uint64
}

type visEntry struct {
	delivered
	visDue
}

type visHeap []visEntry

func (h visHeap) Len() int           { return len(h) }
func (h visHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h visHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *visHeap) Push(x any)        { *h = append(*h, x.(visEntry)) }
func (h *visHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// retireEvery is how often the leader retires old queue messages.
// Retention is minutes to days, so a minute late is nothing.
const retireEvery = time.Minute

// armVisibility counts a delivery's visibility down from now; t.mu is held.
func (t *timers) armVisibility(queue string, seq, token uint64, d time.Duration) {
	if t.vis.current == nil {
		t.vis.current = make(map[delivered]visDue)
	}
	e := visEntry{delivered{queue, seq}, visDue{t.clock.Now().Add(d), token}}
	t.vis.current[e.delivered] = e.visDue
	heap.Push(&t.vis.due, e)
	if len(t.vis.due) > 2*len(t.vis.current)+1024 {
		t.compactVisibility()
	}
	t.rearmVisibility()
}

// compactVisibility rebuilds the heap from the live deadlines, dropping
// the entries that extends and ended deliveries left behind (a consumer
// extending every few seconds for hours would otherwise grow it
// without bound); t.mu is held.
func (t *timers) compactVisibility() {
	due := make(visHeap, 0, len(t.vis.current))
	for k, d := range t.vis.current {
		due = append(due, visEntry{k, d})
	}
	heap.Init(&due)
	t.vis.due = due
}

// rearmVisibility points the one timer at the earliest deadline.
func (t *timers) rearmVisibility() {
	if len(t.vis.due) == 0 {
		return
	}
	first := t.vis.due[0].at
	if t.vis.timer != nil && !t.vis.at.After(first) {
		return
	}
	if t.vis.timer != nil {
		t.vis.timer.Stop()
	}
	t.vis.at = first
	t.vis.timer = t.clock.AfterFunc(max(0, first.Sub(t.clock.Now())), t.visibilityDue)
}

// visibilityDue proposes an expiry for every delivery whose visibility
// ran out, skipping deadlines an Extend or the delivery's end replaced.
func (t *timers) visibilityDue() {
	t.mu.Lock()
	if !t.active {
		t.mu.Unlock()
		return
	}
	now := t.clock.Now()
	var expire []fsm.Command
	for len(t.vis.due) > 0 && !t.vis.due[0].at.After(now) {
		e := heap.Pop(&t.vis.due).(visEntry)
		if t.vis.current[e.delivered] != e.visDue {
			continue // extended, or ended
		}
		delete(t.vis.current, e.delivered)
		t.log.Debug("queue delivery's visibility ran out; proposing expiry", "queue", e.queue, "seq", e.seq, "token", e.token)
		expire = append(expire, &fsm.QueueExpire{Queue: e.queue, Seq: e.seq, Token: e.token})
	}
	t.vis.timer, t.vis.at = nil, time.Time{}
	t.rearmVisibility()
	t.mu.Unlock()
	for _, c := range expire {
		t.fire(c)
	}
}

func (t *timers) queueDelivered(queue string, seq, token uint64, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active {
		t.armVisibility(queue, seq, token, d)
	}
}

// queueDeliveryEnded forgets the delivery's deadline; its heap entry is
// skipped when it comes up.
func (t *timers) queueDeliveryEnded(queue string, seq, token uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := delivered{queue, seq}
	if cur, ok := t.vis.current[k]; ok && cur.token == token {
		delete(t.vis.current, k)
	}
}

// armRetire starts the periodic retirement; t.mu is held. queues lists
// the retirements due (it reads the state, so it runs without t.mu).
func (t *timers) armRetire(queues func(now time.Time) []fsm.Command) {
	run := &retireTicker{}
	var tick func()
	tick = func() {
		t.mu.Lock()
		current := t.active && t.vis.retire == run
		t.mu.Unlock()
		if !current {
			return
		}
		for _, c := range queues(t.clock.Now()) {
			t.fire(c)
		}
		t.mu.Lock()
		if t.active && t.vis.retire == run {
			run.timer = t.clock.AfterFunc(retireEvery, tick)
		}
		t.mu.Unlock()
	}
	run.timer = t.clock.AfterFunc(retireEvery, tick)
	t.vis.retire = run
}

// stopVisibility drops every countdown; t.mu is held.
func (t *timers) stopVisibility() {
	if t.vis.timer != nil {
		t.vis.timer.Stop()
	}
	if t.vis.retire != nil {
		t.vis.retire.timer.Stop()
	}
	t.vis = visibility{}
}

// retirements lists a QueueRetire for each queue with a message sent
// before now less the queue's retention (or with dead letters, whose
// send times the counts do not show), or with dedup ids past its window.
func (m *machine) retirements(now time.Time) []fsm.Command {
	var out []fsm.Command
	m.read(func(st *fsm.State) {
		for _, name := range st.Queues() {
			q, _ := st.Queue(name)
			before := now.Add(-q.Settings.Retention)
			dedupDue := q.DedupIDs > 0 && !q.OldestDedupAt.After(now.Add(-q.Settings.DedupWindow))
			if q.Dead > 0 || dedupDue || (!q.OldestAt.IsZero() && q.OldestAt.Before(before)) {
				out = append(out, &fsm.QueueRetire{Queue: name, Before: before.UnixNano()})
			}
		}
	})
	return out
}

// The fsm.QueueObserver side of the machine: called inside Apply.

func (m *machine) QueueDelivered(queue string, seq, token uint64, d time.Duration) {
	m.timers.queueDelivered(queue, seq, token, d)
}

func (m *machine) QueueDeliveryEnded(queue string, seq, token uint64) {
	m.timers.queueDeliveryEnded(queue, seq, token)
}

func (m *machine) QueueReady(queue string) { m.bell.ring(queue) }

func (m *machine) QueueDeadLettered(queue string, _ uint64) {
	if s, ok := m.events.(QueueEvents); ok {
		s.QueueDeadLettered(queue)
	}
}

// QueueEvents is what the node's event sink (Config.Events) may also
// implement to count queue events applied on this node.
type QueueEvents interface {
	QueueDeadLettered(queue string)
}
