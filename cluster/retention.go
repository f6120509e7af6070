package cluster

import (
	"container/heap"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/fsm"
)

// retention is the leader's countdown for completed idempotency records:
// one heap of deadlines on the monotonic clock and one timer for the
// earliest, since a retention is long (hours) and a timer per key would
// cost far more than the key. When a deadline passes, the leader proposes
// an IdemForget naming the completed attempt; the state machine ignores
// one that no longer matches. A new leader restarts every countdown from
// its takeover, so a stored result is never forgotten early. It is part
// of timers and guarded by timers.mu.
type retention struct {
	due   dueHeap
	timer clock.Timer
	at    time.Time // when timer fires (zero: not armed)
}

type due struct {
	at    time.Time
	key   string
	token uint64
}

type dueHeap []due

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(due)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// armRetention counts key's retention down from now; t.mu is held.
func (t *timers) armRetention(key string, token uint64, d time.Duration) {
	heap.Push(&t.ret.due, due{at: t.clock.Now().Add(d), key: key, token: token})
	t.rearmRetention()
}

// rearmRetention points the one timer at the earliest deadline.
func (t *timers) rearmRetention() {
	if len(t.ret.due) == 0 {
		return
	}
	first := t.ret.due[0].at
	if t.ret.timer != nil && !t.ret.at.After(first) {
		return // already due no later than the earliest
	}
	if t.ret.timer != nil {
		t.ret.timer.Stop()
	}
	t.ret.at = first
	t.ret.timer = t.clock.AfterFunc(max(0, first.Sub(t.clock.Now())), t.retentionDue)
}

// retentionDue proposes a Forget for every record whose retention passed.
func (t *timers) retentionDue() {
	t.mu.Lock()
	if !t.active {
		t.mu.Unlock()
		return
	}
	now := t.clock.Now()
	var forget []fsm.Command
	for len(t.ret.due) > 0 && !t.ret.due[0].at.After(now) {
		d := heap.Pop(&t.ret.due).(due)
		forget = append(forget, &fsm.IdemForget{Key: d.key, Token: d.token})
	}
	t.ret.timer, t.ret.at = nil, time.Time{}
	t.rearmRetention()
	t.mu.Unlock()
	for _, c := range forget {
		t.fire(c)
	}
}

func (t *timers) idemCompleted(key string, token uint64, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active {
		t.armRetention(key, token, d)
	}
}

// stopRetention drops every countdown; t.mu is held.
func (t *timers) stopRetention() {
	if t.ret.timer != nil {
		t.ret.timer.Stop()
	}
	t.ret = retention{}
}

// The fsm.IdemObserver side of the machine: called inside Apply.

func (m *machine) IdemCompleted(key string, token uint64, d time.Duration) {
	m.timers.idemCompleted(key, token, d)
}

// IdemForgotten needs nothing: a heap entry of a forgotten record is
// proposed at most once more and ignored.
func (m *machine) IdemForgotten(string, uint64) {}
