package fsm

import "github.com/leasehold/leasehold/api/leasehold"

// Change events: every change Apply makes, reported with the log index of
// its entry, in apply order. Every node applying the same log reports the
// same events, so a node can serve watches from its own history and a
// watcher can resume on any node from the last index it saw. The state
// machine keeps no history; the node keeps a bounded ring of these.

// EventKind says what changed.
type EventKind uint8

const (
	EventGranted       EventKind = iota + 1 // a lease was granted (at once or to a waiter)
	EventRenewed                            // a lease was renewed
	EventReleased                           // its holder released it (Reason: released or canceled)
	EventExpired                            // its countdown ran out (or its max hold)
	EventForceReleased                      // an operator forced its release
	EventQueued                             // an acquire queued to wait
	EventWithdrawn                          // a waiting acquire was canceled or timed out
	EventPut                                // a key was written
	EventDeleted                            // a key was deleted (also when its lease ended, at the same index)
	EventLeaderChanged                      // an election has a new leader, a new value, or no leader (LeaseID 0)
	EventGroupChanged                       // a group was created, grown (Partition: its count) or deleted (0)
	EventGroupAssigned                      // a member got a partition (Token: the epoch)
	EventGroupRevoking                      // a member must give a partition up
	EventGroupRemoved                       // a member no longer owns a partition
	// Barrier events (barrier.go): Key is the barrier, Version the phase.
	EventBarrierCreated   // a barrier was created
	EventBarrierArrived   // a party arrived (LeaseID, Owner: its lease and name) or a latch was counted down
	EventBarrierWithdrawn // an arrived party's lease ended before the trip
	EventBarrierEnded     // a phase ended: Operation is the outcome; tripped, Token its token
)

func (k EventKind) String() string {
	names := [...]string{"", "granted", "renewed", "released", "expired", "force_released", "queued", "withdrawn", "put", "deleted", "leader_changed",
		"group_changed", "group_assigned", "group_revoking", "group_removed",
		"barrier_created", "barrier_arrived", "barrier_withdrawn", "barrier_ended"}
	if int(k) < len(names) && k != 0 {
		return names[k]
	}
	return "unknown event"
}

// Event is one applied change. It carries what a watcher may see and never
// a lease's secret or its hash. Slices are shared with the state: read
// them, never change them.
//
// A node keeps 100,000 of them (service.Hub), so the small fields sit
// together at the end: 152 bytes, not 168.
type Event struct {
	Index uint64 // the log index of the entry that made the change
	// Lease events, and Queued / Withdrawn (whose LeaseID and Token are 0).
	// LeaderChanged: the election is Resources[0], the leader its lease.
	// Put: the lease the key is now bound to; Deleted: the lease whose end
	// deleted it (0: a plain delete).
	LeaseID   uint64
	Token     uint64
	Resources []string
	Owner     string
	Operation string
	// Put and Deleted.
	Key     string
	Value   []byte // Put: the new value; LeaderChanged: the leader's value
	Version uint64 // Put: the new version; Deleted: the version removed
	// Group events: the group, and the partition (GroupChanged: the
	// count). LeaseID, Resources and Owner are the member's session.
	Group     string
	Partition uint32
	Kind      EventKind
	Reason    EndReason // the end events
}

// EventSink receives every event, inside Apply: it must be quick and must
// not call back into the State. An Observer that also implements EventSink
// receives them (New, Restore, SetObserver look for it; with none,
// emitting an event costs one nil check).
type EventSink interface {
	Event(e Event)
}

// emit reports e, at the entry's index. Callers check hooks.sink first,
// so that with nobody listening an event is not even built.
func (s *State) emit(e Event) {
	e.Index = s.lastIndex
	s.hooks.sink.Event(e)
}

func (s *State) emitLease(k EventKind, l *leasehold.Lease, why EndReason) {
	if s.hooks.sink != nil {
		s.emit(Event{Kind: k, LeaseID: l.ID, Token: l.Token, Resources: l.Resources,
			Owner: l.Owner, Operation: l.Operation, Reason: why})
	}
}

func (s *State) emitWaiter(k EventKind, c *Acquire) {
	if s.hooks.sink != nil {
		s.emit(Event{Kind: k, Resources: c.Resources, Owner: c.Owner, Operation: c.Operation})
	}
}

func (s *State) emitKV(k EventKind, key string, value []byte, version, lease uint64) {
	if s.hooks.sink != nil {
		s.emit(Event{Kind: k, Key: key, Value: value, Version: version, LeaseID: lease})
	}
}

// endEvent is the event kind for a lease ended for why.
func endEvent(why EndReason) EventKind {
	switch why {
	case EndExpired:
		return EventExpired
	case EndForced:
		return EventForceReleased
	}
	return EventReleased
}
