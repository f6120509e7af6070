package cluster

import (
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/fsm"
)

// revocations are the leader's bounds on partition revocations (see
// fsm/groups.go): one timer per pending revocation, which proposes a
// GroupLapse when it fires; the state machine ignores one that was
// acknowledged meanwhile. A new leader restarts every bound from its
// takeover, so a member is never cut short by a leader change. They are
// part of timers and guarded by timers.mu.

type revocationKey struct {
	group     string
	partition uint32
	epoch     uint64
}

func (t *timers) armRevocation(group string, lease uint64, partition uint32, epoch uint64, d time.Duration) {
	k := revocationKey{group, partition, epoch}
	if old := t.revokes[k]; old != nil {
		old.Stop()
	}
	t.revokes[k] = t.clock.AfterFunc(d, func() {
		t.log.Info("a partition revocation was not acknowledged in time; ending the member's session",
			"group", group, "partition", partition, "epoch", epoch, "lease", lease, "after", d)
		t.fire(&fsm.GroupLapse{Group: group, LeaseID: lease, Partition: partition, Epoch: epoch})
	})
}

func (t *timers) revocationEnded(group string, partition uint32, epoch uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := revocationKey{group, partition, epoch}
	if r := t.revokes[k]; r != nil {
		r.Stop()
		delete(t.revokes, k)
	}
}

// stopRevocations drops every bound; t.mu is held.
func (t *timers) stopRevocations() {
	for _, r := range t.revokes {
		r.Stop()
	}
	t.revokes = make(map[revocationKey]clock.Timer)
}

// The fsm.GroupObserver side of the machine: called inside Apply.

func (m *machine) GroupRevoking(group string, lease uint64, partition uint32, epoch uint64, d time.Duration) {
	m.timers.mu.Lock()
	defer m.timers.mu.Unlock()
	if m.timers.active {
		m.timers.armRevocation(group, lease, partition, epoch, d)
	}
}

func (m *machine) GroupRevokeEnded(group string, partition uint32, epoch uint64) {
	m.timers.revocationEnded(group, partition, epoch)
}

func (m *machine) GroupHandedOff(group string, wait time.Duration) {
	if o, ok := m.events.(interface{ GroupHandedOff(time.Duration) }); ok {
		o.GroupHandedOff(wait)
	}
}
