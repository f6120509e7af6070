package cluster

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hashicorp/raft"

	"github.com/leasehold/leasehold/api/leasehold"
)

// ErrDiskFull marks errors caused by a full disk under the data dir
// (errors.Is). The node cannot recover from one in place: see storeFault.
var ErrDiskFull = errors.New("disk full")

// storeFault records the first failed write to the raft log or stable
// store. After one, raft-wal's in-memory writer has moved past what is on
// disk (its offsets include the entries whose write failed, or its tail
// segment is sealed with no successor), so every later append fails
// ("non-monotonic append to segment", "segment is sealed") even once space
// returns. Repairing that in place would mean swapping the log under a
// running raft, so the node stops instead: raft is shut down, every
// request and /readyz and /healthz report the fault, and the process is
// expected to exit (leasehold serve does) so a supervisor restarts it.
// Reopening the log drops the unwritten tail, as after a crash; nothing
// that was acknowledged is lost, because an entry is acknowledged only
// after its append succeeded.
type storeFault struct {
	dir     string
	segSize int // bytes a new WAL segment takes
	once    sync.Once
	err     error
	done    chan struct{} // closed once err is set
	// stop, once set, shuts raft down without waiting. It runs inside the
	// failed write, before raft goes on: a node that stepped down on the
	// failure must not win an election before it is stopped.
	stop atomic.Pointer[func()]
}

func newStoreFault(dir string, segSize int) *storeFault {
	return &storeFault{dir: dir, segSize: segSize, done: make(chan struct{})}
}

// record keeps the first fault and returns err described for a person.
func (f *storeFault) record(what string, err error) error {
	described := describeStoreError(f.dir, f.segSize, what, err)
	f.once.Do(func() {
		f.err = described
		close(f.done)
		if stop := f.stop.Load(); stop != nil {
			(*stop)()
		}
	})
	return described
}

// get returns the fault, or nil while there is none.
func (f *storeFault) get() error {
	select {
	case <-f.done:
		return f.err
	default:
		return nil
	}
}

// describeStoreError names the data dir and says when the disk is full
// (wrapping ErrDiskFull): the error is ENOSPC, or there is less room than
// a new segment takes. raft-wal creates the next segment in the
// background and only logs its failure; the append after it then fails
// with "segment is sealed".
func describeStoreError(dir string, segSize int, what string, err error) error {
	if isDiskFull(err) {
		return fmt.Errorf("data dir %s: %w: %s: %w", dir, ErrDiskFull, what, err)
	}
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) == nil && int64(st.Bavail)*st.Bsize < int64(segSize) {
		return fmt.Errorf("data dir %s: %w (%s free, a new WAL segment takes %s): %s: %w",
			dir, ErrDiskFull, mib(int64(st.Bavail)*st.Bsize), mib(int64(segSize)), what, err)
	}
	return fmt.Errorf("data dir %s: %s: %w", dir, what, err)
}

func isDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

func mib(n int64) string { return fmt.Sprintf("%.4g MiB", float64(n)/(1<<20)) }

// unavailable is the fault as the API reports it.
func (f *storeFault) unavailable() error {
	if err := f.get(); err != nil {
		return leasehold.Errorf(leasehold.CodeUnavailable,
			"this node stopped after a failed write to its log (%v); it must be restarted", err)
	}
	return nil
}

// faultStopLog is the log store raft sees: after the first failed write it
// records the fault and refuses every later write, so nothing is appended
// to a log whose in-memory state no longer matches the disk.
type faultStopLog struct {
	raft.LogStore
	fault *storeFault
}

func (l *faultStopLog) IsMonotonic() bool {
	m, ok := l.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

func (l *faultStopLog) StoreLog(e *raft.Log) error { return l.StoreLogs([]*raft.Log{e}) }

func (l *faultStopLog) StoreLogs(logs []*raft.Log) error {
	return l.write("append to the raft log", func() error { return l.LogStore.StoreLogs(logs) })
}

func (l *faultStopLog) DeleteRange(lo, hi uint64) error {
	return l.write("delete from the raft log", func() error { return l.LogStore.DeleteRange(lo, hi) })
}

func (l *faultStopLog) write(what string, do func() error) error {
	if err := l.fault.get(); err != nil {
		return err
	}
	if err := do(); err != nil {
		return l.fault.record(what, err)
	}
	return nil
}

// faultStopStable is the stable store (term, vote) raft sees. raft panics
// when it cannot save its term or vote; the fault it records first names
// the data dir and the full disk, and that is the panic's message.
type faultStopStable struct {
	raft.StableStore
	fault *storeFault
}

func (s *faultStopStable) Set(k, v []byte) error {
	if err := s.StableStore.Set(k, v); err != nil {
		return s.fault.record("save raft state", err)
	}
	return nil
}

func (s *faultStopStable) SetUint64(k []byte, v uint64) error {
	if err := s.StableStore.SetUint64(k, v); err != nil {
		return s.fault.record("save raft state", err)
	}
	return nil
}

// watchFault stops raft once a write failed, so the node neither campaigns
// nor serves on a log it cannot extend.
func (n *Node) watchFault() {
	defer n.wg.Done()
	select {
	case <-n.stop:
		return
	case <-n.fault.done:
	}
	n.log.Error("stopping: a write to the raft log failed; restart the process once the cause is fixed "+
		"(the log reopens at its last durable entry)", "err", n.fault.err)
	n.timers.deactivate()
	// In case the fault came before stop was set. Not stopRaft().Error():
	// Close waits for this goroutine, and that waits for raft's.
	n.stopRaft()
}

// Failed is closed when the node has stopped after a failed write to its
// log; Fault then says why. The process should exit and be restarted.
func (n *Node) Failed() <-chan struct{} { return n.fault.done }

// Fault is the failed write that stopped the node, or nil.
func (n *Node) Fault() error { return n.fault.get() }

// checkRoom refuses to start a node whose data dir has less free space
// than one WAL segment: raft-wal creates each segment file at its full size
// (the first on a new data dir, the next as soon as the current one
// fills), so such a node could not start, or would stop again soon. This
// also makes a restart on a disk that is still full fail the same clear
// way every time.
func checkRoom(dir string, segSize int) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return nil // no figure to judge by: let opening the log tell
	}
	if free := int64(st.Bavail) * st.Bsize; free < int64(segSize) {
		return fmt.Errorf("cluster: data dir %s: %w: %s free, and the log preallocates each WAL segment file in full (%s, WALSegmentSize)",
			dir, ErrDiskFull, mib(free), mib(int64(segSize)))
	}
	return nil
}

// openLogError describes a failure to open or create the log, naming the
// preallocated segment size when the disk is full: raft-wal creates each
// segment file at its full size up front.
func openLogError(dir string, segmentSize int, err error) error {
	if isDiskFull(err) {
		return fmt.Errorf("cluster: data dir %s: %w: opening the log preallocates a WAL segment file of %s (WALSegmentSize): %w",
			dir, ErrDiskFull, mib(int64(segmentSize)), err)
	}
	return fmt.Errorf("cluster: open log: %w", err)
}

// await waits for a future of raft.Apply or raft.Barrier. raft queues
// those in a buffered channel and, once shut down, never answers one that
// was queued just before — as happens when the node stops on a fault while
// a proposal or its takeover barrier races the shutdown. So the wait also
// ends when the node stops or faults; the outcome is then unknown, which
// the caller reports as unavailable.
func (n *Node) await(f raft.Future) error {
	errc := make(chan error, 1)
	go func() { errc <- f.Error() }()
	select {
	case err := <-errc:
		return err
	case <-n.fault.done:
		return n.fault.err
	case <-n.stop:
		return raft.ErrRaftShutdown
	}
}
