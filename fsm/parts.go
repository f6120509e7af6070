package fsm

// The sub-states. Each primitive is a sub-state of State: a struct in the
// primitive's file that owns its maps and counters, with a pointer back to
// the State for what they share (the token space: nextToken; the dedup
// window; the audit log; events and countdowns: emit, arm, disarm). Beside
// its commands (the table of commands, registry.go), its snapshot
// sections (the sections table, snapshot.go) and its Answer type, it is
// what State asks of every sub-state in turn (parts): docs/architecture.md
// lists it all.

// part is what State asks of every sub-state, in the order of parts.
type part interface {
	// init makes the sub-state empty, bound to s (st = s), and tracks its
	// cowMaps (State.track).
	init(s *State)
	// captureInto sets v's copy of the sub-state for a capture: its
	// cowMaps frozen (cowMap.freeze), its counters copied, st = v. What it
	// holds besides cowMaps must be what no section writer reads, or what
	// Apply only appends to (capture.go).
	captureInto(v *State)
	// eachCountdown visits the countdowns it holds armed, as a new leader
	// starts them (countdown.go).
	eachCountdown(f func(Countdown))
	// leaseEnded hears that lease l ended (it was released, expired,
	// canceled or forced), after the lease's own events: a sub-state built
	// on leases frees what l held.
	leaseEnded(l *lease)
}

// parts are the sub-states, in the order State asks them.
func (s *State) parts() [8]part {
	return [...]part{&s.leases, &s.sems, &s.elections, &s.kv, &s.idem, &s.queues, &s.groups, &s.barriers}
}

// track registers a sub-state's copy-on-write maps, which a capture
// freezes and thaw folds back (capture.go). Constructors call it once.
func (s *State) track(maps ...cowMapper) { s.snaps.maps = append(s.snaps.maps, maps...) }
