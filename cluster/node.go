package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fsm"
)

// Node is one leasehold replica. Its methods are safe for concurrent use.
type Node struct {
	cfg    Config
	log    *slog.Logger
	raft   *raft.Raft
	wal    *raftwal.WAL
	meta   *metadb.BoltMetaDB
	trans  *raft.NetworkTransport
	mux    *mux
	lock   *os.File
	m      *machine
	timers *timers
	waits  *waits
	floor  *tokenFloor
	fault  *storeFault

	props    proposals
	stop     chan struct{}
	wg       sync.WaitGroup
	closed   sync.Once
	closeErr error
	// stopRaft shuts raft down once; its future waits for raft's
	// goroutines (a second raft.Shutdown returns one that does not).
	stopRaft func() raft.Future

	// leaderChanges counts this node's leadership transitions (gained or
	// lost), for metrics; see LeaderChanges.
	leaderChanges atomic.Uint64
}

// Events hears about applied changes on this node, for metrics and logs.
// Methods are called while the state is locked: keep them quick.
type Events interface {
	Granted(l *leasehold.Lease)
	Renewed(l *leasehold.Lease)
	Ended(l *leasehold.Lease, why fsm.EndReason)
}

type noEvents struct{}

func (noEvents) Granted(*leasehold.Lease)              {}
func (noEvents) Renewed(*leasehold.Lease)              {}
func (noEvents) Ended(*leasehold.Lease, fsm.EndReason) {}

// Open opens (or creates) the node's data directory, starts raft and, on a
// brand-new directory, bootstraps the cluster from cfg.Peers (or this node
// alone). events may be nil.
func Open(cfg Config, events Events) (*Node, error) {
	n, err := open(cfg, events)
	if err != nil {
		if cfg.RaftListener != nil && (n == nil || n.mux == nil) {
			cfg.RaftListener.Close() // the node owns it, even when it fails to open
		}
		return nil, err
	}
	return n, nil
}

// open is Open; on error it returns the node as far as it got (shut down),
// so Open can tell whether the raft listener was handed on.
func open(cfg Config, events Events) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if events == nil {
		events = noEvents{}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("cluster: create data dir: %w", err)
	}
	lock, err := lockDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg:    cfg,
		log:    cfg.Logger,
		lock:   lock,
		timers: newTimers(cfg.Clock, cfg.Logger),
		waits:  newWaits(),
		fault:  newStoreFault(cfg.DataDir, cmp.Or(cfg.WALSegmentSize, raftwal.DefaultSegmentSize)),
		stop:   make(chan struct{}),
	}
	n.m = newMachine(cfg.FSM, n.timers, n.waits, events, cfg.History, cfg.Logger)
	n.m.fault = n.fault
	if err := n.start(); err != nil {
		n.shutdown()
		return n, err
	}
	n.wg.Add(3)
	go n.leaderLoop()
	go n.timerLoop()
	go n.watchFault()
	return n, nil
}

func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cluster: open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("cluster: data dir %s is in use by another leasehold process", dir)
	}
	return f, nil
}

func (n *Node) start() error {
	cfg := n.cfg
	hl := newHclog(n.log, "raft")
	walDir := filepath.Join(cfg.DataDir, "wal")
	if err := os.MkdirAll(walDir, 0o700); err != nil {
		return fmt.Errorf("cluster: create log dir: %w", err)
	}
	segSize := cmp.Or(cfg.WALSegmentSize, raftwal.DefaultSegmentSize)
	if err := checkRoom(cfg.DataDir, segSize); err != nil {
		return err
	}
	// raft-wal v0.4 does not close a meta store it opened itself, so an
	// in-process restart would block on its file lock: own it here.
	n.meta = &metadb.BoltMetaDB{}
	// Damage is refused first: repairTail only clears what a crash or a
	// failed write left after the log's last write, which the check accepts.
	check, err := verifyDataDir(cfg.DataDir, n.meta)
	if err != nil {
		return err
	}
	floor, err := openTokenFloor(cfg.DataDir)
	if err != nil {
		return err
	}
	n.floor, n.m.floor = floor, floor
	if check.log != nil {
		if err := clearCleanStop(n.meta); err != nil {
			return err
		}
	}
	dropped, err := repairTail(n.meta, segSize, check.log)
	if err != nil {
		return err
	}
	if dropped != "" {
		n.log.Warn("cleared the unfinished last write a crash or a failed append left in the log (it was never acknowledged)", "bytes", dropped)
	}
	w, err := raftwal.Open(walDir, raftwal.WithLogger(newHclog(n.log, "wal")), raftwal.WithMetaStore(n.meta),
		raftwal.WithSegmentSize(segSize))
	if err != nil {
		return openLogError(cfg.DataDir, segSize, err)
	}
	n.wal = w
	files, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 2, hl)
	if err != nil {
		return fmt.Errorf("cluster: open snapshots: %w", err)
	}
	snaps := newestSnapshot{files}
	adv := cfg.Advertise
	if adv == "" {
		adv = cfg.RaftAddr
	}
	advAddr, err := net.ResolveTCPAddr("tcp", adv)
	if err != nil {
		return fmt.Errorf("cluster: advertise address %q: %w", adv, err)
	}
	if advAddr.IP == nil || advAddr.IP.IsUnspecified() {
		return fmt.Errorf("cluster: advertise address %q must be an address other nodes can dial (set --advertise)", adv)
	}
	ln := cfg.RaftListener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.RaftAddr); err != nil {
			return fmt.Errorf("cluster: listen for raft on %s: %w", cfg.RaftAddr, err)
		}
	}
	n.mux = newMux(ln, cfg.Dial, cfg.TLS)
	n.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  &raftLayer{subListener: newSubListener(n.mux, n.mux.raft), advertise: advAddr},
		MaxPool: 3,
		Timeout: 10 * time.Second,
		Logger:  hl,
	})

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = hl
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	rc.BatchApplyCh = true
	if err := raft.ValidateConfig(rc); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}

	existing, err := raft.HasExistingState(w, w, snaps)
	if err != nil {
		return fmt.Errorf("cluster: read existing state: %w", err)
	}
	logs := &faultStopLog{LogStore: &tailSafeLog{WAL: w, snaps: snaps}, fault: n.fault}
	stable := &faultStopStable{StableStore: w, fault: n.fault}
	if !existing && !cfg.Join {
		// Bootstrap before raft runs: a peer that started first may already
		// be asking for votes, and a running raft that heard a newer term
		// refuses a live bootstrap ("bootstrap only works on new clusters").
		var servers []raft.Server
		for _, p := range cfg.Peers {
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
		}
		if len(servers) == 0 {
			servers = []raft.Server{{Suffrage: raft.Voter, ID: rc.LocalID, Address: n.trans.LocalAddr()}}
		}
		if err := raft.BootstrapCluster(rc, logs, stable, snaps, n.trans, raft.Configuration{Servers: servers}); err != nil {
			return fmt.Errorf("cluster: bootstrap: %w", err)
		}
		n.log.Info("bootstrapped a new cluster", "voters", len(servers))
	}
	r, err := raft.NewRaft(rc, n.m, logs, stable, snaps, n.trans)
	if err != nil {
		return fmt.Errorf("cluster: start raft: %w", err)
	}
	n.raft = r
	n.stopRaft = sync.OnceValue(r.Shutdown)
	stop := func() { n.stopRaft() } // returns at once; Close waits for it
	n.fault.stop.Store(&stop)
	return nil
}

// Close stops the node. It is idempotent; proposals in flight fail with
// Unavailable.
func (n *Node) Close() error {
	n.closed.Do(func() {
		close(n.stop)
		// Raft first: that fails every pending future, so no loop stays
		// blocked on one.
		err := n.stopRaft().Error()
		n.wg.Wait()
		n.floor.wait()
		if err == nil {
			err = n.settleFloor()
		}
		if err == nil {
			err = n.markCleanStop()
		}
		n.closeErr = errors.Join(err, n.shutdown())
	})
	return n.closeErr
}

func (n *Node) shutdown() error {
	var errs []error
	if n.raft != nil {
		errs = append(errs, n.stopRaft().Error()) // idempotent
	}
	n.timers.deactivate()
	if n.trans != nil {
		errs = append(errs, n.trans.Close())
	}
	if n.mux != nil {
		errs = append(errs, n.mux.close())
	}
	if n.wal != nil {
		errs = append(errs, n.wal.Close())
	}
	if n.meta != nil {
		errs = append(errs, n.meta.Close())
	}
	if n.lock != nil {
		errs = append(errs, n.lock.Close())
	}
	return errors.Join(errs...)
}

var errStopped = leasehold.Errorf(leasehold.CodeUnavailable, "the node is shutting down")

func (n *Node) notLeader() error {
	if err := n.fault.unavailable(); err != nil {
		return err
	}
	addr, id := n.raft.LeaderWithID()
	if id == raft.ServerID(n.cfg.NodeID) {
		// Raft still names this node, but it is not serving as leader.
		addr, id = "", ""
	}
	return &NotLeaderError{LeaderID: string(id), LeaderAddr: string(addr)}
}

func (n *Node) applyError(err error) error {
	if err := n.fault.unavailable(); err != nil {
		return err
	}
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return n.notLeader()
	case errors.Is(err, raft.ErrLeadershipLost):
		return leasehold.Errorf(leasehold.CodeUnavailable,
			"leadership was lost before the change committed; its outcome is unknown: retry with the same request_id")
	case errors.Is(err, raft.ErrRaftShutdown):
		return errStopped
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return leasehold.Errorf(leasehold.CodeUnavailable, "the log did not accept the change within %v; retry", n.cfg.ApplyTimeout)
	}
	return leasehold.Errorf(leasehold.CodeUnavailable, "commit failed: %v", err)
}

// leaderLoop starts the leader timers when this node takes over, after a
// barrier so every earlier entry has been applied, and stops them when it
// steps down.
func (n *Node) leaderLoop() {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case isLeader := <-n.raft.LeaderCh():
			n.leaderChanges.Add(1) // metrics only: every gain and loss
			if !isLeader {
				n.timers.deactivate()
				n.log.Info("stepped down")
				continue
			}
			if !n.barrier() || !n.raiseTokens() {
				continue
			}
			n.timers.activate(n.m)
			n.log.Info("became leader; every lease countdown restarts now")
		}
	}
}

// barrier waits until every entry before this leader's term is applied,
// retrying while this node still leads. It reports whether it got there.
func (n *Node) barrier() bool {
	for {
		err := n.await(n.raft.Barrier(n.cfg.ApplyTimeout))
		if err == nil {
			return true
		}
		if n.raft.State() != raft.Leader {
			return false
		}
		n.log.Warn("took over but could not yet apply earlier entries; retrying", "err", err)
		select {
		case <-n.stop:
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// timerLoop proposes the commands queued by fired timers.
func (n *Node) timerLoop() {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case <-n.timers.kick:
		}
		cmds := n.timers.take()
		for len(cmds) > 0 {
			chunk := cmds[:min(len(cmds), n.cfg.MaxBatch)]
			cmds = cmds[len(chunk):]
			n.proposeTimed(chunk)
		}
	}
}

// proposeTimed commits timer commands in one entry; on failure while still
// leader they are queued again after a short pause.
func (n *Node) proposeTimed(cmds []fsm.Command) {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
	defer cancel()
	if _, err := n.ProposeAll(ctx, cmds); err == nil || !n.timers.isActive() {
		return
	}
	n.log.Warn("could not commit timer events; retrying", "count", len(cmds))
	n.cfg.Clock.AfterFunc(100*time.Millisecond, func() {
		for _, c := range cmds {
			n.timers.fire(c)
		}
	})
}

// Queued reports, on the leader, whether the acquire with this key
// (fsm.Acquire.Key) waits in line, with the attempt that owns its place
// and its secret's hash (see fsm.State.Queued). Elsewhere it reports
// false.
func (n *Node) Queued(key string) (attempt string, secretHash [32]byte, ok bool) {
	if !n.IsLeader() {
		return "", [32]byte{}, false
	}
	n.m.read(func(st *fsm.State) { attempt, secretHash, ok = st.Queued(key) })
	return attempt, secretHash, ok
}

// Contended reports, on the leader, whether an acquire of resources
// would have to wait now (see fsm.State.Contended). Elsewhere it reports
// false.
func (n *Node) Contended(resources []string) (yes bool) {
	if !n.IsLeader() {
		return false
	}
	n.m.read(func(st *fsm.State) { yes = st.Contended(resources) })
	return yes
}

// GrantOf returns, on the leader, the grant the acquire with this key
// got, if its lease still holds (see fsm.State.GrantOf). Elsewhere it
// reports false.
func (n *Node) GrantOf(key string) (r fsm.Result, attempt string, ok bool) {
	if !n.IsLeader() {
		return fsm.Result{}, "", false
	}
	n.m.read(func(st *fsm.State) { r, attempt, ok = st.GrantOf(key) })
	return r, attempt, ok
}

// Watch returns a channel that receives the outcome of the queued acquire
// with this key (fsm.Acquire.Key). Call it before proposing the acquire,
// and call stop when done.
func (n *Node) Watch(key string) (outcome <-chan fsm.Result, stop func()) {
	return n.waits.watch(key)
}

// Read runs f on the state after checking, with a quorum, that this node is
// still the leader: every change acknowledged before Read was called is
// visible to f. f must not keep references into the state.
func (n *Node) Read(ctx context.Context, f func(*fsm.State)) error {
	if !n.IsLeader() {
		return n.notLeader()
	}
	fut := n.raft.VerifyLeader()
	errc := make(chan error, 1)
	go func() { errc <- fut.Error() }()
	select {
	case err := <-errc:
		if err != nil {
			return n.notLeader()
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	n.m.read(f)
	return nil
}

// LeaseAge is how long a lease has been held on this leader's clock.
func (n *Node) LeaseAge(id uint64) time.Duration { return n.timers.age(id) }

// ExpiresIn is the time left on a lease's countdown, if this node leads.
func (n *Node) ExpiresIn(id uint64) (time.Duration, bool) { return n.timers.expiresIn(id) }

// LeaderChanges is how many times this node gained or lost leadership
// since it started (raft may merge transitions that follow each other
// faster than they are read). For metrics.
func (n *Node) LeaderChanges() uint64 { return n.leaderChanges.Load() }

// IsLeader reports whether this node leads and has taken over its timers.
func (n *Node) IsLeader() bool { return n.timers.isActive() && n.fault.get() == nil }

// Leader returns the current leader's id and raft address, if known.
func (n *Node) Leader() (id, addr string) {
	a, i := n.raft.LeaderWithID()
	return string(i), string(a)
}

// WaitLeader blocks until this node leads or ctx ends.
func (n *Node) WaitLeader(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !n.IsLeader() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: no leadership: %w", ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// Stats is a small view of raft's progress.
type Stats struct {
	State        string
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64
	LastToken    uint64
	Counts       fsm.Counts
}

func (n *Node) Stats() Stats {
	s := Stats{
		State:        n.raft.State().String(),
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: n.raft.AppliedIndex(),
	}
	fmt.Sscan(n.raft.Stats()["term"], &s.Term)
	n.m.read(func(st *fsm.State) {
		s.LastToken = st.LastToken()
		s.Counts = st.Counts()
		// raft counts an entry applied only after the state machine
		// returns; counts that already show an entry come with its index.
		s.AppliedIndex = max(s.AppliedIndex, st.LastIndex())
	})
	return s
}

// Snapshot forces a snapshot now (tests and operators).
func (n *Node) Snapshot() error { return n.raft.Snapshot().Error() }

// ReadLocal runs f on this replica's applied state, whether or not it
// leads: what it reads may be behind the leader's (st.LastIndex says how
// far it got). For reads that pair with the node's own watch history.
func (n *Node) ReadLocal(f func(*fsm.State)) { n.m.read(f) }

// EncodedState returns this replica's whole state, encoded as in a
// snapshot, and the log index it reflects. Replicas at the same index must
// return the same bytes.
func (n *Node) EncodedState() (index uint64, state []byte) {
	n.m.read(func(s *fsm.State) {
		index, state = s.LastIndex(), s.Snapshot()
	})
	return index, state
}
