package cluster

import (
	"log/slog"
	"sync"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/fsm"
)

// timers are the leader's countdowns: one per lease (to Expire), per waiter
// (to WaitTimeout) and per lock-delay (to Unblock). They run only on the
// leader, on its monotonic clock; a new leader restarts every countdown from
// its takeover, so a leader change never shortens a lease (invariant 5).
// A timer that fires proposes a command; the state machine ignores one that
// lost a race (an Expire after a renewal carries a stale renew count).
//
// Lock order: machine.mu before timers.mu.
type timers struct {
	mu      sync.Mutex
	clock   clock.Clock
	active  bool
	leases  *leaseClock // one heap of lease countdowns (leaseclock.go)
	waits   map[string]clock.Timer
	blocks  map[string]clock.Timer
	ret     retention                     // idempotency results' retention (retention.go)
	vis     visibility                    // queue deliveries' visibility (queuetimers.go)
	revokes map[revocationKey]clock.Timer // partition revocations' bounds (revocations.go)
	pending []fsm.Command
	kick    chan struct{}
	log     *slog.Logger
}

func newTimers(c clock.Clock, log *slog.Logger) *timers {
	t := &timers{
		clock:   c,
		log:     log,
		waits:   make(map[string]clock.Timer),
		blocks:  make(map[string]clock.Timer),
		revokes: make(map[revocationKey]clock.Timer),
		kick:    make(chan struct{}, 1),
	}
	t.leases = newLeaseClock(c, t.leasesDue)
	return t
}

// leasesDue proposes an expiry for each lease whose countdown ran out.
func (t *timers) leasesDue(gen uint64) {
	t.mu.Lock()
	cmds := t.leases.expire(gen)
	if t.active {
		t.pending = append(t.pending, cmds...)
	}
	t.mu.Unlock()
	for _, c := range cmds {
		e := c.(*fsm.Expire)
		t.log.Debug("lease countdown ran out; proposing expiry", "lease", e.LeaseID, "renew_count", e.RenewCount)
	}
	if len(cmds) > 0 {
		select {
		case t.kick <- struct{}{}:
		default:
		}
	}
}

// fire queues a command for the proposer goroutine.
func (t *timers) fire(c fsm.Command) {
	t.mu.Lock()
	if t.active {
		t.pending = append(t.pending, c)
	}
	t.mu.Unlock()
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// take hands the queued commands to the proposer.
func (t *timers) take() []fsm.Command {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.pending
	t.pending = nil
	return p
}

func (t *timers) isActive() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.active
}

func (t *timers) armLease(id, renewCount uint64, start time.Time, d time.Duration) {
	t.leases.arm(id, renewCount, start, d)
}

func firstDeadline(l *leasehold.Lease, heldFor time.Duration) time.Duration {
	if l.MaxHold > 0 {
		return max(0, min(l.TTL, l.MaxHold-heldFor))
	}
	return l.TTL
}

func (t *timers) granted(l *leasehold.Lease) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active {
		t.armLease(l.ID, l.RenewCount, t.clock.Now(), firstDeadline(l, 0))
	}
}

func (t *timers) renewed(l *leasehold.Lease, remaining time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.active {
		return
	}
	start, ok := t.leases.startOf(l.ID)
	if !ok {
		start = t.clock.Now()
	}
	t.armLease(l.ID, l.RenewCount, start, remaining)
}

func (t *timers) ended(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.leases.remove(id)
}

func (t *timers) queued(requestID string, wait time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active {
		t.armWait(requestID, wait)
	}
}

func (t *timers) armWait(requestID string, wait time.Duration) {
	if old := t.waits[requestID]; old != nil {
		old.Stop()
	}
	t.waits[requestID] = t.clock.AfterFunc(wait, func() { t.fire(&fsm.WaitTimeout{Key: requestID}) })
}

func (t *timers) waitEnded(requestID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if w := t.waits[requestID]; w != nil {
		w.Stop()
		delete(t.waits, requestID)
	}
}

func (t *timers) blocked(resource string, token uint64, delay time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active {
		t.armBlock(resource, token, delay)
	}
}

func (t *timers) armBlock(resource string, token uint64, delay time.Duration) {
	if old := t.blocks[resource]; old != nil {
		old.Stop()
	}
	t.blocks[resource] = t.clock.AfterFunc(delay, func() { t.fire(&fsm.Unblock{Resource: resource, Token: token}) })
}

// age is how long lease id has been held, as this leader has seen it; the
// leader stamps it into renewals so max_hold survives a leader change.
func (t *timers) age(id uint64) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.leases.age(id)
}

// expiresIn is the time left on lease id's countdown, if this node is the
// leader and knows it.
func (t *timers) expiresIn(id uint64) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.leases.expiresIn(id)
}

// restart (re)starts every countdown from now, as a new leader must. It
// reads the state, so the caller must not hold machine.mu.
func (t *timers) restart(m *machine) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.active {
		return
	}
	t.stopAllLocked()
	now := t.clock.Now()
	m.state.EachLease(func(l *leasehold.Lease, heldFor time.Duration) {
		t.armLease(l.ID, l.RenewCount, now.Add(-heldFor), firstDeadline(l, heldFor))
	})
	m.state.EachWaiter(func(id string, wait time.Duration) { t.armWait(id, wait) })
	m.state.EachBlock(func(r string, tok uint64, d time.Duration) { t.armBlock(r, tok, d) })
	m.state.EachIdemCompleted(func(k string, tok uint64, d time.Duration) { t.armRetention(k, tok, d) })
	m.state.EachQueueDelivery(func(q string, seq, tok uint64, d time.Duration) { t.armVisibility(q, seq, tok, d) })
	t.armRetire(m.retirements)
	m.state.EachGroupRevocation(t.armRevocation)
}

// activate starts the timers on becoming leader.
func (t *timers) activate(m *machine) {
	t.mu.Lock()
	t.active = true
	t.mu.Unlock()
	t.restart(m)
}

// deactivate stops every countdown on losing leadership.
func (t *timers) deactivate() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.active = false
	t.stopAllLocked()
	t.pending = nil
}

func (t *timers) stopAllLocked() {
	for _, w := range t.waits {
		w.Stop()
	}
	for _, b := range t.blocks {
		b.Stop()
	}
	t.leases.stopAll()
	clear(t.waits)
	clear(t.blocks)
	t.stopRetention()
	t.stopVisibility()
	t.stopRevocations()
}
