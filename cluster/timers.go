package cluster

import (
	"log/slog"
	"sync"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/fsm"
)

// timers are the leader's countdowns (countdowns.go), one per thing the
// state times: the state arms and disarms them as it applies entries
// (fsm.Countdowns, through the machine). They run only on the leader, on
// its monotonic clock; a new leader rebuilds every countdown from the
// state at its takeover and restarts each from then, so a leader change
// never shortens a lease, a wait, a lock-delay, a retention, a
// visibility or a revocation bound (invariant 5). A countdown that runs
// out proposes its command; the state machine ignores one that lost a
// race (an Expire after a renewal carries a stale renew count).
//
// Lock order: machine.mu before timers.mu.
type timers struct {
	mu     sync.Mutex
	clock  clock.Clock
	active bool
	cd     *countdowns
	// retire lists the queue retirements due (queuetimers.go); it reads
	// the state, so it runs without mu. Set by activate.
	retire  func(now time.Time) []fsm.Command
	pending []fsm.Command
	kick    chan struct{}
	log     *slog.Logger
}

func newTimers(c clock.Clock, log *slog.Logger) *timers {
	t := &timers{clock: c, log: log, kick: make(chan struct{}, 1)}
	t.cd = newCountdowns(c, t.due)
	return t
}

// due proposes, as one batch, the command of every countdown that ran out.
func (t *timers) due(gen uint64) {
	t.mu.Lock()
	cmds, retire := t.cd.expire(gen)
	retire = retire && t.active
	if retire {
		t.cd.arm(fsm.Countdown{Key: retireKey, After: retireEvery})
	}
	queues := t.retire
	if t.active {
		t.pending = append(t.pending, cmds...)
	}
	t.mu.Unlock()
	for _, c := range cmds {
		t.logFired(c)
	}
	if retire && queues != nil {
		for _, c := range queues(t.clock.Now()) {
			t.fire(c)
		}
	}
	if len(cmds) > 0 {
		t.poke()
	}
}

func (t *timers) logFired(c fsm.Command) {
	switch c := c.(type) {
	case *fsm.Expire:
		t.log.Debug("lease countdown ran out; proposing expiry", "lease", c.LeaseID, "renew_count", c.RenewCount)
	case *fsm.QueueExpire:
		t.log.Debug("queue delivery's visibility ran out; proposing expiry", "queue", c.Queue, "seq", c.Seq, "token", c.Token)
	case *fsm.GroupLapse:
		t.log.Info("a partition revocation was not acknowledged in time; ending the member's session",
			"group", c.Group, "partition", c.Partition, "epoch", c.Epoch, "lease", c.LeaseID)
	}
}

// fire queues a command for the proposer goroutine.
func (t *timers) fire(c fsm.Command) {
	t.mu.Lock()
	if t.active {
		t.pending = append(t.pending, c)
	}
	t.mu.Unlock()
	t.poke()
}

func (t *timers) poke() {
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

// arm and disarm are the state's calls (fsm.Countdowns), inside Apply;
// only a leader times anything.
func (t *timers) arm(c fsm.Countdown) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active {
		t.cd.arm(c)
	}
}

func (t *timers) disarm(k fsm.CountdownKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cd.disarm(k)
}

// age is how long lease id has been held, as this leader has seen it; the
// leader stamps it into renewals so max_hold survives a leader change.
func (t *timers) age(id uint64) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cd.age(fsm.CountdownKey{Kind: fsm.CountdownLease, ID: id})
}

// expiresIn is the time left on lease id's countdown, if this node is the
// leader and knows it.
func (t *timers) expiresIn(id uint64) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cd.expiresIn(fsm.CountdownKey{Kind: fsm.CountdownLease, ID: id})
}

// restart rebuilds every countdown from the state, each starting now, as
// a new leader must. It reads the state, so the caller must not hold
// machine.mu.
func (t *timers) restart(m *machine) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.active {
		return
	}
	t.cd.stopAll()
	m.state.EachCountdown(t.cd.arm)
	t.cd.arm(fsm.Countdown{Key: retireKey, After: retireEvery})
}

// activate starts the timers on becoming leader.
func (t *timers) activate(m *machine) {
	t.mu.Lock()
	t.active = true
	t.retire = m.retirements
	t.mu.Unlock()
	t.restart(m)
}

// deactivate stops every countdown on losing leadership.
func (t *timers) deactivate() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.active = false
	t.cd.stopAll()
	t.pending = nil
}
