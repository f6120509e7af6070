package cluster

import (
	"container/heap"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/fsm"
)

// leaseClock keeps every lease's countdown in one heap under one runtime
// timer, armed for the earliest deadline. A runtime timer and closure per
// lease cost about 215 bytes each; an entry here costs about 100, and
// 100,000 leases renewing at 10,000/s re-arm one timer rather than
// thousands. Times are nanoseconds on the leader's monotonic clock since
// base. It is guarded by timers.mu.
type leaseClock struct {
	clock clock.Clock
	base  time.Time // monotonic origin of start and deadline
	byID  map[uint64]*leaseCountdown
	due   countdownHeap
	timer clock.Timer   // armed for due[0], or nil
	at    time.Duration // when timer fires, since base
	gen   uint64        // which arming timer is; a stopped one that fires anyway finds it changed
	onDue func(gen uint64)
}

type leaseCountdown struct {
	id         uint64
	renewCount uint64
	start      time.Duration // when the holding began, since base
	deadline   time.Duration // since base
	idx        int           // position in due; -1 once it ran out (kept for age until the lease ends)
}

// newLeaseClock returns an empty clock; onDue runs in the timer's
// goroutine and must take the owner's lock and call expire(gen).
func newLeaseClock(c clock.Clock, onDue func(gen uint64)) *leaseClock {
	return &leaseClock{clock: c, base: c.Now(), byID: make(map[uint64]*leaseCountdown), onDue: onDue}
}

func (lc *leaseClock) now() time.Duration { return lc.clock.Now().Sub(lc.base) }

// arm (re)starts lease id's countdown: it runs out d from now.
func (lc *leaseClock) arm(id, renewCount uint64, start time.Time, d time.Duration) {
	now := lc.now()
	c := lc.byID[id]
	if c == nil {
		c = &leaseCountdown{id: id, idx: -1}
		lc.byID[id] = c
	}
	c.renewCount, c.start, c.deadline = renewCount, start.Sub(lc.base), now+d
	if c.idx >= 0 {
		heap.Fix(&lc.due, c.idx)
	} else {
		heap.Push(&lc.due, c)
	}
	lc.rearm(now)
}

// startOf is when lease id's holding began on this leader's clock.
func (lc *leaseClock) startOf(id uint64) (time.Time, bool) {
	if c := lc.byID[id]; c != nil {
		return lc.base.Add(c.start), true
	}
	return time.Time{}, false
}

func (lc *leaseClock) remove(id uint64) {
	c := lc.byID[id]
	if c == nil {
		return
	}
	delete(lc.byID, id)
	if c.idx >= 0 {
		heap.Remove(&lc.due, c.idx)
	}
}

func (lc *leaseClock) age(id uint64) time.Duration {
	if c := lc.byID[id]; c != nil {
		return lc.now() - c.start
	}
	return 0
}

func (lc *leaseClock) expiresIn(id uint64) (time.Duration, bool) {
	if c := lc.byID[id]; c != nil {
		return max(0, c.deadline-lc.now()), true
	}
	return 0, false
}

// stopAll forgets every countdown.
func (lc *leaseClock) stopAll() {
	if lc.timer != nil {
		lc.timer.Stop()
		lc.timer = nil
	}
	lc.gen++
	clear(lc.byID)
	clear(lc.due)
	lc.due = lc.due[:0]
}

// rearm points the timer at the earliest deadline, unless it already
// fires no later than that. A timer that fires early finds nothing due
// and re-arms; one that would fire late is replaced.
func (lc *leaseClock) rearm(now time.Duration) {
	if len(lc.due) == 0 {
		return
	}
	next := lc.due[0].deadline
	if lc.timer != nil {
		if lc.at <= next {
			return
		}
		lc.timer.Stop()
	}
	lc.gen++
	gen := lc.gen
	lc.at = next
	lc.timer = lc.clock.AfterFunc(max(0, next-now), func() { lc.onDue(gen) })
}

// expire pops the countdowns that ran out by now and returns their
// expiries, if timer gen is still the armed one.
func (lc *leaseClock) expire(gen uint64) []fsm.Command {
	if gen != lc.gen {
		return nil
	}
	lc.timer = nil
	now := lc.now()
	var out []fsm.Command
	for len(lc.due) > 0 && lc.due[0].deadline <= now {
		c := heap.Pop(&lc.due).(*leaseCountdown)
		out = append(out, &fsm.Expire{LeaseID: c.id, RenewCount: c.renewCount})
	}
	lc.rearm(now)
	return out
}

type countdownHeap []*leaseCountdown

func (h countdownHeap) Len() int           { return len(h) }
func (h countdownHeap) Less(i, j int) bool { return h[i].deadline < h[j].deadline }
func (h countdownHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *countdownHeap) Push(x any) {
	c := x.(*leaseCountdown)
	c.idx = len(*h)
	*h = append(*h, c)
}
func (h *countdownHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	c.idx = -1
	*h = old[:len(old)-1]
	return c
}
