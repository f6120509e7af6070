package cluster

import (
	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
)

// tailSafeLog works around a raft-wal v0.4.0 bug (hashicorp/raft-wal#31).
// A tail truncation — a follower dropping a conflicting, uncommitted
// suffix after a leader change — marks the segment holding the entries it
// keeps as sealed without writing that segment's index. It reads fine
// until the process restarts; then those entries cannot be read ("sealed
// segment has no index block") and raft panics replaying them.
//
// Here a tail truncation instead empties the log and writes back the kept
// entries raft may still need (those after the newest snapshot, which is
// all a restart replays; a follower that needs older ones is sent the
// snapshot) into a fresh segment. The cost is a rewrite, in memory, of at
// most the entries since the last snapshot, and only on this rare event. A
// crash between the emptying and the write-back loses those entries on
// this node only, which raft treats as a lagging follower's log.
//
// It also tells raft the log is not "monotonic" (raft-wal says it is).
// After installing a snapshot raft empties a monotonic log but keeps its
// in-memory last index. When the install is stale — a removed peer's
// replication goroutine finishing its last pass after the same server was
// re-added, so it lands on a follower already past the snapshot — that
// leaves a hole: the next append is accepted after entries that are gone,
// and applying them panics with "log not found". A non-monotonic log is
// compacted up to the snapshot instead, keeping what follows, as raft does
// with BoltDB. The one append raft-wal cannot take then, past a gap right
// after an install, StoreLogs makes by emptying the log first.
type tailSafeLog struct {
	*raftwal.WAL
	snaps raft.SnapshotStore
}

func (l *tailSafeLog) IsMonotonic() bool { return false }

func (l *tailSafeLog) StoreLog(e *raft.Log) error { return l.StoreLogs([]*raft.Log{e}) }

func (l *tailSafeLog) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	last, err := l.LastIndex()
	if err != nil {
		return err
	}
	if last > 0 && logs[0].Index > last+1 {
		// raft appends past its last entry only once the entry before is
		// the snapshot it just installed, so everything held is covered.
		first, err := l.FirstIndex()
		if err != nil {
			return err
		}
		if err := l.WAL.DeleteRange(first, last); err != nil {
			return err
		}
	}
	return l.WAL.StoreLogs(logs)
}

func (l *tailSafeLog) DeleteRange(lo, hi uint64) error {
	first, err := l.FirstIndex()
	if err != nil {
		return err
	}
	last, err := l.LastIndex()
	if err != nil {
		return err
	}
	if lo <= first || lo > last || hi < last {
		return l.WAL.DeleteRange(lo, hi) // not a tail truncation
	}
	from := first
	if metas, err := l.snaps.List(); err == nil && len(metas) > 0 && metas[0].Index+1 > from {
		// A snapshot never covers the uncommitted entries being dropped;
		// the bound is for safety.
		from = min(metas[0].Index+1, lo)
	}
	keep := make([]*raft.Log, 0, lo-from)
	for i := from; i < lo; i++ {
		e := new(raft.Log)
		if err := l.GetLog(i, e); err != nil {
			return err
		}
		keep = append(keep, e)
	}
	if err := l.WAL.DeleteRange(first, last); err != nil {
		return err
	}
	return l.WAL.StoreLogs(keep)
}

// newestSnapshot lists only the newest snapshot to raft. When raft cannot
// restore the newest at startup it falls back to an older one, whose log
// entries may be compacted away: it then panics reading them ("log not
// found"). The check before startup verifies every snapshot's checksum;
// with only the newest listed, a snapshot that passes it but does not
// restore is an error from raft.NewRaft, not a panic.
type newestSnapshot struct{ *raft.FileSnapshotStore }

func (s newestSnapshot) List() ([]*raft.SnapshotMeta, error) {
	metas, err := s.FileSnapshotStore.List()
	return metas[:min(len(metas), 1)], err
}
