package cluster

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fsm"
)

// machine adapts fsm.State to raft.FSM and passes the state's events to the
// leader timers and the waiting requests. mu guards state: Apply writes,
// readers take the read lock.
type machine struct {
	mu     sync.RWMutex
	state  *fsm.State
	cfg    fsm.Config
	timers *timers
	waits  *waits
	events eventSink
	// history hears the state's change events (nil: nobody watches).
	history History
	// bell wakes Receives that long-poll a queue (queuebell.go).
	bell *bell
	log  *slog.Logger
	// floor is saved above every token before any is answered; outcomes
	// for waiting requests are held in pending until it is.
	floor   *tokenFloor
	pending []delivery
	// fault stops the node when the floor cannot be saved for a full
	// disk, as a failed log write does (nil in tests of the machine alone).
	fault *storeFault
	// broken is set when a committed entry cannot be read. The state stops
	// there: applying later entries, or snapshotting, would let this
	// replica diverge. Every later Apply fails with it, until a snapshot
	// install replaces the state.
	broken error
}

type delivery struct {
	requestID string
	result    fsm.Result
}

// eventSink receives applied events for metrics and logs.
type eventSink interface {
	Granted(l *leasehold.Lease)
	Ended(l *leasehold.Lease, why fsm.EndReason)
	Renewed(l *leasehold.Lease)
}

func newMachine(cfg fsm.Config, t *timers, w *waits, ev eventSink, h History, log *slog.Logger) *machine {
	m := &machine{cfg: cfg, timers: t, waits: w, events: ev, history: h, log: log, bell: newBell()}
	m.state = fsm.New(cfg, m)
	return m
}

// Apply is called by raft, one committed entry at a time.
func (m *machine) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		if m.history != nil {
			m.mu.Lock()
			m.history.Applied(l.Index)
			m.mu.Unlock()
		}
		return nil
	}
	b, err := fsm.DecodeBatch(l.Data)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.broken != nil {
		return m.broken
	}
	if err != nil {
		// Skipping an entry we cannot read would let this replica diverge.
		m.log.Error("cannot read a committed log entry: this node stops applying entries; restart it", "index", l.Index, "err", err)
		m.broken = leasehold.Errorf(leasehold.CodeUnavailable,
			"this node cannot read log entry %d (%v) and has stopped applying entries: restart it, and it names the damage", l.Index, err)
		return m.broken
	}
	res := m.state.Apply(l.Index, b)
	if m.history != nil {
		m.history.Applied(l.Index)
	}
	err = m.floor.cover(m.state.LastToken())
	if err != nil && isDiskFull(err) && m.fault != nil {
		// The WAL segment in use may still have room (it is
		// preallocated), so no log write fails: stop as if one had, or a
		// leader would go on leading and refuse every answer.
		err = m.fault.record("save the token floor", err)
	}
	if err != nil {
		m.log.Error("cannot save the token floor: answers that carry tokens fail until it can be saved", "err", err)
		err = leasehold.Errorf(leasehold.CodeUnavailable, "the node could not save its token floor: %v", err)
	}
	for _, d := range m.pending {
		if err != nil {
			d.result = fsm.Result{Err: err}
		}
		m.waits.deliver(d.requestID, d.result)
	}
	m.pending = m.pending[:0]
	if err != nil {
		return err
	}
	return res
}

// Snapshot captures the state for raft to persist (snapshot.go). It
// takes the write lock: a capture freezes the state's maps.
func (m *machine) Snapshot() (raft.FSMSnapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.broken != nil {
		return nil, m.broken
	}
	return snapshot{m.state.Capture()}, nil
}

func (m *machine) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	s, err := fsm.Restore(data, m.cfg, m)
	if err != nil {
		return err
	}
	m.mu.Lock()
	if have := m.state.LastIndex(); s.LastIndex() < have {
		m.mu.Unlock()
		// Only a stale sender (a removed peer's replication finishing
		// late) installs a snapshot older than what this node applied:
		// taking it would wind the state back. Refusing fails the install
		// and leaves raft as it was.
		return fmt.Errorf("snapshot holds entries up to %d, older than the %d this node applied", s.LastIndex(), have)
	}
	if err := m.floor.cover(s.LastToken()); err != nil {
		m.mu.Unlock()
		return err
	}
	m.state, m.broken = s, nil
	if m.history != nil {
		m.history.Restored(s.LastIndex())
	}
	m.mu.Unlock()
	m.bell.ringAll()
	m.timers.restart(m) // no-op unless leader
	return nil
}

// failed returns why the machine stopped applying entries, or nil.
func (m *machine) failed() error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.broken
}

// read runs f with the state read-locked.
func (m *machine) read(f func(*fsm.State)) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	f(m.state)
}

// The fsm.Observer side: called inside Apply with mu held.

func (m *machine) Granted(l *leasehold.Lease, _ string) { m.events.Granted(l) }

func (m *machine) Renewed(l *leasehold.Lease, _ time.Duration) { m.events.Renewed(l) }

func (m *machine) Ended(l *leasehold.Lease, why fsm.EndReason) {
	if why != fsm.EndReleased {
		m.log.Info("lease ended", "lease", l.ID, "why", why.String(), "owner", l.Owner, "operation", l.Operation)
	}
	m.events.Ended(l, why)
}

func (m *machine) WaitEnded(requestID string, r fsm.Result) {
	m.pending = append(m.pending, delivery{requestID, r})
}

// Arm and Disarm hand the state's countdowns to the leader timers.
func (m *machine) Arm(c fsm.Countdown)       { m.timers.arm(c) }
func (m *machine) Disarm(k fsm.CountdownKey) { m.timers.disarm(k) }

func (m *machine) GroupHandedOff(_ string, wait time.Duration) {
	if o, ok := m.events.(interface{ GroupHandedOff(time.Duration) }); ok {
		o.GroupHandedOff(wait)
	}
}

// Event passes the state's change events on to the history.
func (m *machine) Event(e fsm.Event) {
	if m.history != nil {
		m.history.Event(e)
	}
}
