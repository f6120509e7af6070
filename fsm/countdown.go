package fsm

import "time"

// A countdown is something the leader times on its monotonic clock and
// ends by proposing a command: a lease's expiry, a waiter's wait bound, a
// lock-delay, an idempotency result's retention, a queue delivery's
// visibility, a partition revocation's bound. The state says, as it
// applies an entry, which countdowns it arms and disarms (Countdowns);
// the node keeps them all in one keyed heap. A command that lost a race
// (an Expire after a renewal) is ignored when it applies, so a countdown
// only needs to be right, never exactly in time.
//
// A new leader rebuilds every countdown from the state (EachCountdown),
// restarting each from its takeover: nothing the state times ends early
// because the leader changed (invariant 5).

// CountdownKind says what a countdown times.
type CountdownKind uint8

const (
	CountdownLease      CountdownKind = iota + 1 // ID: the lease
	CountdownWait                                // Name: the waiting acquire's key
	CountdownLockDelay                           // Name: the resource
	CountdownRetention                           // Name: the idempotency key
	CountdownVisibility                          // Name: the queue; ID: the delivery's token
	CountdownRevocation                          // Name: the group; ID: the epoch; N: the partition
	CountdownBarrier                             // Name: the barrier; ID: the phase (barrier.go)
)

// CountdownKey names one countdown; arming a key again replaces it.
type CountdownKey struct {
	Kind CountdownKind
	N    uint32
	ID   uint64
	Name string
}

// Countdown is one armed countdown.
type Countdown struct {
	Key CountdownKey
	// After is how long from now it runs.
	After time.Duration
	// Age is how long what it times has already run (a lease: how long
	// it has been held, which max_hold bounds). A countdown armed again
	// keeps the age it had; Age counts for one not armed yet.
	Age time.Duration
	// Fire is the command to propose when it runs out.
	Fire Command
}

// Countdowns hears, inside Apply, every countdown the state arms or
// disarms. An Observer that also implements it gets the calls. They
// must be quick and must not call back into the State.
type Countdowns interface {
	Arm(c Countdown)
	Disarm(k CountdownKey)
}

// EachCountdown visits every countdown the state holds armed, as a new
// leader must start it: each runs its whole length from now (a lease its
// TTL, less what max_hold leaves), whatever the old leader had left.
func (s *State) EachCountdown(f func(Countdown)) {
	for _, p := range s.parts() {
		p.eachCountdown(f)
	}
}

// firstDeadline is how long lease l runs from a countdown's start when it
// has been held for heldFor: its TTL, or what max_hold leaves if less.
func firstDeadline(l *lease, heldFor time.Duration) time.Duration {
	if maxHold := l.MaxHold(); maxHold > 0 {
		return max(0, min(l.TTL, maxHold-heldFor))
	}
	return l.TTL
}

func leaseKey(id uint64) CountdownKey { return CountdownKey{Kind: CountdownLease, ID: id} }

func leaseCountdown(l *lease, after, age time.Duration) Countdown {
	return Countdown{Key: leaseKey(l.ID), After: after, Age: age, Fire: &Expire{LeaseID: l.ID, RenewCount: l.RenewCount}}
}

func waitKey(key string) CountdownKey { return CountdownKey{Kind: CountdownWait, Name: key} }

func waitCountdown(key string, wait time.Duration) Countdown {
	return Countdown{Key: waitKey(key), After: wait, Fire: &WaitTimeout{Key: key}}
}

func lockDelayKey(resource string) CountdownKey {
	return CountdownKey{Kind: CountdownLockDelay, Name: resource}
}

func lockDelayCountdown(resource string, b block) Countdown {
	return Countdown{Key: lockDelayKey(resource), After: b.delay, Fire: &Unblock{Resource: resource, Token: b.token}}
}

func retentionKey(key string) CountdownKey { return CountdownKey{Kind: CountdownRetention, Name: key} }

func retentionCountdown(key string, r *idemRecord) Countdown {
	return Countdown{Key: retentionKey(key), After: r.retention, Fire: &IdemForget{Key: key, Token: r.token}}
}

func visibilityKey(queue string, token uint64) CountdownKey {
	return CountdownKey{Kind: CountdownVisibility, Name: queue, ID: token}
}

func visibilityCountdown(queue string, m *qmsg, vis time.Duration) Countdown {
	return Countdown{Key: visibilityKey(queue, m.token), After: vis,
		Fire: &QueueExpire{Queue: queue, Seq: m.seq, Token: m.token}}
}

func revocationKey(group string, partition uint32, epoch uint64) CountdownKey {
	return CountdownKey{Kind: CountdownRevocation, Name: group, ID: epoch, N: partition}
}

func revocationCountdown(group string, lease uint64, partition uint32, epoch uint64, timeout time.Duration) Countdown {
	return Countdown{Key: revocationKey(group, partition, epoch), After: timeout,
		Fire: &GroupLapse{Group: group, LeaseID: lease, Partition: partition, Epoch: epoch}}
}

// The arming side, inside Apply: with nobody timing, a countdown is not
// even built (an acquire and its release allocate ten times in all).

func (s *State) armLease(l *lease, after, age time.Duration) {
	if s.hooks.timers != nil {
		s.hooks.timers.Arm(leaseCountdown(l, after, age))
	}
}

func (s *State) armWait(key string, wait time.Duration) {
	if s.hooks.timers != nil {
		s.hooks.timers.Arm(waitCountdown(key, wait))
	}
}

func (s *State) armLockDelay(resource string, b block) {
	if s.hooks.timers != nil {
		s.hooks.timers.Arm(lockDelayCountdown(resource, b))
	}
}

func (s *State) armRetention(key string, r *idemRecord) {
	if s.hooks.timers != nil {
		s.hooks.timers.Arm(retentionCountdown(key, r))
	}
}

func (s *State) armVisibility(queue string, m *qmsg, vis time.Duration) {
	if s.hooks.timers != nil {
		s.hooks.timers.Arm(visibilityCountdown(queue, m, vis))
	}
}

func (s *State) armRevocation(group string, lease uint64, partition uint32, epoch uint64, timeout time.Duration) {
	if s.hooks.timers != nil {
		s.hooks.timers.Arm(revocationCountdown(group, lease, partition, epoch, timeout))
	}
}

func (s *State) disarm(k CountdownKey) {
	if s.hooks.timers != nil {
		s.hooks.timers.Disarm(k)
	}
}
