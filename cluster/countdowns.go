package cluster

import (
	"container/heap"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/fsm"
)

// countdowns keeps every countdown of the leader (fsm/countdown.go:
// leases, waits, lock-delays, retentions, visibilities, revocations, and
// the periodic queue retirement) in one heap keyed by fsm.CountdownKey,
// under one runtime timer armed for the earliest deadline. A runtime
// timer and closure per lease cost about 215 bytes each; an entry here
// about 100 (its expiry included), and 100,000 leases renewing at 10,000/s re-arm one timer
// rather than thousands. Times are nanoseconds on the leader's monotonic
// clock since base. It is guarded by timers.mu.
type countdowns struct {
	clock clock.Clock
	base  time.Time // monotonic origin of start and deadline
	// byKey finds a countdown by its key; a lease's, by far the most
	// numerous, by its id alone (8 bytes of key rather than 32).
	byKey  map[fsm.CountdownKey]*countdown
	leases map[uint64]*countdown
	due    countdownHeap
	timer  clock.Timer   // armed for due[0], or nil
	at     time.Duration // when timer fires, since base
	gen    uint64        // which arming timer is; a stopped one that fires anyway finds it changed
	onDue  func(gen uint64)
}

type countdown struct {
	fire     fsm.Command   // proposed when it runs out; nil for the queue retirement
	start    time.Duration // when what it times began (a lease's holding), since base
	deadline time.Duration // since base
	// idx is the position in due; -1 once it ran out. A countdown that
	// ran out stays until it is disarmed or armed again: a lease's age
	// counts on if its expiry loses to a renewal.
	idx int
}

// retireKey is the queue retirement's countdown (queuetimers.go): not
// the state's, but timed alike.
var retireKey = fsm.CountdownKey{Name: "queue retirement"}

// newCountdowns returns an empty heap; onDue runs in the timer's
// goroutine and must take the owner's lock and call expire(gen).
func newCountdowns(c clock.Clock, onDue func(gen uint64)) *countdowns {
	return &countdowns{clock: c, base: c.Now(), byKey: make(map[fsm.CountdownKey]*countdown),
		leases: make(map[uint64]*countdown), onDue: onDue}
}

func (cs *countdowns) get(k fsm.CountdownKey) *countdown {
	if k.Kind == fsm.CountdownLease {
		return cs.leases[k.ID]
	}
	return cs.byKey[k]
}

func (cs *countdowns) put(k fsm.CountdownKey, e *countdown) {
	if k.Kind == fsm.CountdownLease {
		cs.leases[k.ID] = e
	} else {
		cs.byKey[k] = e
	}
}

func (cs *countdowns) forget(k fsm.CountdownKey) {
	if k.Kind == fsm.CountdownLease {
		delete(cs.leases, k.ID)
	} else {
		delete(cs.byKey, k)
	}
}

func (cs *countdowns) now() time.Duration { return cs.clock.Now().Sub(cs.base) }

// arm (re)starts c's countdown: it runs out c.After from now. One armed
// again keeps its start; a new one started c.Age ago.
func (cs *countdowns) arm(c fsm.Countdown) {
	now := cs.now()
	e := cs.get(c.Key)
	if e == nil {
		e = &countdown{start: now - c.Age, idx: -1}
		cs.put(c.Key, e)
	}
	e.fire, e.deadline = c.Fire, now+c.After
	if e.idx >= 0 {
		heap.Fix(&cs.due, e.idx)
	} else {
		heap.Push(&cs.due, e)
	}
	cs.rearm(now)
}

func (cs *countdowns) disarm(k fsm.CountdownKey) {
	e := cs.get(k)
	if e == nil {
		return
	}
	cs.forget(k)
	if e.idx >= 0 {
		heap.Remove(&cs.due, e.idx)
	}
}

// age is how long what k times has run on this leader's clock.
func (cs *countdowns) age(k fsm.CountdownKey) time.Duration {
	if e := cs.get(k); e != nil {
		return cs.now() - e.start
	}
	return 0
}

func (cs *countdowns) expiresIn(k fsm.CountdownKey) (time.Duration, bool) {
	if e := cs.get(k); e != nil {
		return max(0, e.deadline-cs.now()), true
	}
	return 0, false
}

// stopAll forgets every countdown.
func (cs *countdowns) stopAll() {
	if cs.timer != nil {
		cs.timer.Stop()
		cs.timer = nil
	}
	cs.gen++
	clear(cs.byKey)
	clear(cs.leases)
	clear(cs.due)
	cs.due = cs.due[:0]
}

// rearm points the timer at the earliest deadline, unless it already
// fires no later than that. A timer that fires early finds nothing due
// and re-arms; one that would fire late is replaced.
func (cs *countdowns) rearm(now time.Duration) {
	if len(cs.due) == 0 {
		return
	}
	next := cs.due[0].deadline
	if cs.timer != nil {
		if cs.at <= next {
			return
		}
		cs.timer.Stop()
	}
	cs.gen++
	gen := cs.gen
	cs.at = next
	cs.timer = cs.clock.AfterFunc(max(0, next-now), func() { cs.onDue(gen) })
}

// expire pops the countdowns that ran out by now, if timer gen is still
// the armed one, and returns the commands they fire (in deadline order)
// and whether the queue retirement is due.
func (cs *countdowns) expire(gen uint64) (fire []fsm.Command, retire bool) {
	if gen != cs.gen {
		return nil, false
	}
	cs.timer = nil
	now := cs.now()
	for len(cs.due) > 0 && cs.due[0].deadline <= now {
		e := heap.Pop(&cs.due).(*countdown)
		if e.fire == nil {
			retire = true
			continue
		}
		fire = append(fire, e.fire)
	}
	cs.rearm(now)
	return fire, retire
}

type countdownHeap []*countdown

func (h countdownHeap) Len() int           { return len(h) }
func (h countdownHeap) Less(i, j int) bool { return h[i].deadline < h[j].deadline }
func (h countdownHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *countdownHeap) Push(x any) {
	c := x.(*countdown)
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
