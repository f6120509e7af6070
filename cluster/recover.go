package cluster

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

// RecoveryPlan is what Recover finds in a stopped node's data dir and
// what it will do.
type RecoveryPlan struct {
	// Damage is the first problem, nil for a data dir the node starts on
	// as it is (nothing to do); Problems are all of them. They are what
	// the node refuses to start on: Recover runs the same checks.
	Damage   *DamageError
	Problems []*DamageError
	// Snapshots are damaged snapshots that will be moved aside.
	Snapshots []string
	// Snapshot is the index of the newest intact snapshot (0: none).
	Snapshot uint64
	// RebuildLog says the log is written anew with the entries that follow
	// on from that snapshot: FirstIndex to LastGood (none if FirstIndex is
	// 0). Otherwise the log stays as it is.
	RebuildLog           bool
	FirstIndex, LastGood uint64
	// LostFrom to LostTo are the entries lost (none if LostTo < LostFrom);
	// MaybeMore says damage at the log's end may have taken more after
	// them, which nothing on disk shows.
	LostFrom, LostTo uint64
	MaybeMore        bool
	// TokenFloor is the floor saved: every token issued from now on is at
	// least this. FloorRepaired says the token-floor file was missing or
	// damaged, so the floor is worked out from the log and snapshots: a
	// wide margin above every token and index they show.
	TokenFloor    uint64
	FloorRepaired bool
	// Voters are the voters of the cluster configuration the kept state
	// ends with. A node of several must not be recovered in place: with a
	// log shorter than its vote promised, it could help elect a leader that
	// lacks acknowledged entries. It is removed from the cluster first, and
	// rejoins.
	Voters []string
	// Backup is the directory the damaged files go to.
	Backup string
	// Fresh says nothing of the state is left: the node starts again as a
	// new cluster (tokens still start at the floor).
	Fresh bool
}

// Lost is how many entries are known to be lost.
func (p *RecoveryPlan) Lost() uint64 {
	if p.LostTo < p.LostFrom {
		return 0
	}
	return p.LostTo - p.LostFrom + 1
}

// recoverFloorGuess is how far above the highest token and index it can
// see Recover puts a token floor it has to work out: entries lost off the
// log's end granted tokens nothing on disk shows.
const recoverFloorGuess = 1 << 20

// Recover repairs a stopped node's damaged data dir so that it can start
// again. It runs the checks the node runs at startup; for each problem:
// damaged snapshots are moved aside; the log is written anew with the
// entries that follow on from the newest intact snapshot (or from index
// 1) as far as they go intact, which is the most any state can be rebuilt
// to; a damaged or missing token floor is worked out again from the log
// and snapshots. The token floor is only ever raised, so no token is
// issued twice. Nothing is deleted: every file dropped or changed goes into
// the plan's Backup directory first. confirm sees the plan before anything
// changes; Recover does nothing unless it returns true (except finishing
// a recovery that was interrupted after it had put the new log in place).
func Recover(dir string, confirm func(*RecoveryPlan) bool) (*RecoveryPlan, error) {
	if !hasLeaseholdData(dir) {
		return nil, fmt.Errorf("cluster: %s holds no leasehold log or snapshot", dir)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if err := finishRebuild(dir); err != nil {
		return nil, err
	}
	meta := &metadb.BoltMetaDB{}
	defer meta.Close()
	c, err := checkDir(dir, meta)
	if err != nil {
		return nil, err
	}
	plan, err := planRecovery(c)
	if err != nil || plan.Damage == nil || !confirm(plan) {
		return plan, err
	}
	if err := os.MkdirAll(plan.Backup, 0o700); err != nil {
		return plan, fmt.Errorf("cluster: create backup dir: %w", err)
	}
	for _, s := range plan.Snapshots {
		if err := os.Rename(s, filepath.Join(plan.Backup, filepath.Base(s))); err != nil {
			return plan, fmt.Errorf("cluster: move damaged snapshot aside: %w", err)
		}
	}
	if plan.RebuildLog {
		if err := rebuildLog(c, meta, plan); err != nil {
			return plan, err
		}
	}
	if plan.TokenFloor != c.floor || c.floorBad {
		if err := moveIfExists(filepath.Join(dir, TokenFloorFile), filepath.Join(plan.Backup, TokenFloorFile)); err != nil {
			return plan, err
		}
		if err := (&tokenFloor{dir: dir}).save(plan.TokenFloor); err != nil {
			return plan, err
		}
	}
	return plan, syncDir(dir)
}

// hasLeaseholdData reports whether dir holds a log or snapshots.
func hasLeaseholdData(dir string) bool {
	for _, p := range []string{filepath.Join("wal", metadb.FileName), "snapshots", rebuildDir} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			return true
		}
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	return len(segs) > 0
}

// planRecovery works out what to keep from the verdict on the data dir.
func planRecovery(c *dirCheck) (*RecoveryPlan, error) {
	p := &RecoveryPlan{
		Problems: c.problems, Snapshot: c.snapshot, RebuildLog: c.logBad,
		LastGood: c.intact, LostFrom: c.intact + 1, LostTo: c.lostTo, MaybeMore: c.maybeMore,
		Backup: filepath.Join(c.dir, "damaged-"+time.Now().UTC().Format("20060102T150405Z")),
		Fresh:  c.intact == 0,
	}
	if len(c.problems) == 0 {
		return p, nil // nothing to do
	}
	p.Damage = c.problems[0]
	for _, s := range c.damaged {
		p.Snapshots = append(p.Snapshots, s.dir)
	}
	if len(c.keep) > 0 {
		p.FirstIndex = c.keep[0].index
	}
	var err error
	if p.Voters, err = keptVoters(c); err != nil {
		return nil, err
	}
	// The saved floor is above every token answered; it is raised past
	// every index the data dir shows. One that must be worked out again
	// starts from the state's token counter, which entries raise past their
	// own index (several grants in one entry, RaiseTokens): replaying the
	// state kept gives it.
	seen := max(c.lostTo, c.intact)
	p.TokenFloor = max(c.floor, seen+1)
	if c.floorBad || c.noFloor {
		last, err := replayLastToken(c)
		if err != nil {
			return nil, err
		}
		p.TokenFloor, p.FloorRepaired = max(c.floor, seen, last)+recoverFloorGuess, true
	}
	return p, nil
}

// keptVoters reads the voters of the last cluster configuration in the
// state kept: the newest intact snapshot's, or a later one in the log.
func keptVoters(c *dirCheck) ([]string, error) {
	var conf raft.Configuration
	if s, ok := c.newestSnapshot(); ok {
		b, err := os.ReadFile(filepath.Join(s.dir, "meta.json"))
		var m raft.SnapshotMeta
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		if err != nil {
			return nil, fmt.Errorf("cluster: read snapshot %s: %w", s.dir, err)
		}
		conf = m.Configuration
	}
	err := forEachEntry(c.log, c.keep, func(l *raft.Log) error {
		if l.Type == raft.LogConfiguration && l.Index > c.snapshot {
			conf = raft.DecodeConfiguration(l.Data)
		}
		return nil
	})
	var voters []string
	for _, s := range conf.Servers {
		if s.Suffrage == raft.Voter {
			voters = append(voters, string(s.ID))
		}
	}
	return voters, err
}

// finishRebuild completes a recovery that stopped while it put the new log
// in place (the old one moved aside, the new one not yet renamed), or
// drops a half-written new log (the old one is still in place).
func finishRebuild(dir string) error {
	tmp, walDir := filepath.Join(dir, rebuildDir), filepath.Join(dir, "wal")
	if _, err := os.Stat(tmp); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if _, err := os.Stat(walDir); errors.Is(err, os.ErrNotExist) {
		if err := os.Rename(tmp, walDir); err != nil {
			return fmt.Errorf("cluster: finish the interrupted recovery: %w", err)
		}
		return syncDir(dir)
	}
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("cluster: drop the half-built log of an interrupted recovery: %w", err)
	}
	return nil
}

// rebuildLog writes the entries kept into a new log beside the old one,
// with raft's term and vote, then moves the old log into the backup and
// the new one into its place.
func rebuildLog(c *dirCheck, meta *metadb.BoltMetaDB, plan *RecoveryPlan) error {
	walDir, tmp := filepath.Join(c.dir, "wal"), filepath.Join(c.dir, rebuildDir)
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return fmt.Errorf("cluster: create the new log: %w", err)
	}
	segSize := raftwal.DefaultSegmentSize
	if c.log != nil && len(c.log.state.Segments) > 0 && c.log.state.Segments[0].SizeLimit > 0 {
		segSize = int(c.log.state.Segments[0].SizeLimit)
	}
	nm := &metadb.BoltMetaDB{}
	w, err := raftwal.Open(tmp, raftwal.WithMetaStore(nm), raftwal.WithSegmentSize(segSize))
	if err != nil {
		nm.Close()
		return fmt.Errorf("cluster: create the new log: %w", err)
	}
	err = writeKept(c, meta, w, nm, plan)
	err = errors.Join(err, w.Close(), nm.Close())
	if err == nil {
		err = syncDir(tmp)
	}
	if err != nil {
		return fmt.Errorf("cluster: write the new log: %w", err)
	}
	if err := moveIfExists(walDir, filepath.Join(plan.Backup, "wal")); err != nil {
		return err
	}
	if err := syncDir(c.dir); err != nil {
		return err
	}
	if err := os.Rename(tmp, walDir); err != nil {
		return fmt.Errorf("cluster: put the new log in place: %w", err)
	}
	return nil
}

// writeKept fills the new log: raft's term and vote (unless nothing of
// the state is left: the node then bootstraps as a new cluster), the
// entries kept, and a clean stop at the last of them.
func writeKept(c *dirCheck, meta *metadb.BoltMetaDB, w *raftwal.WAL, nm *metadb.BoltMetaDB, plan *RecoveryPlan) error {
	if plan.Fresh {
		return nil
	}
	term := c.snapshotTerm()
	if c.log != nil && !c.log.noMeta {
		for _, k := range []string{keyLastVoteTerm, keyLastVoteCand, keyCurrentTerm} {
			v, err := meta.GetStable([]byte(k))
			if err != nil {
				return err
			}
			if v != nil {
				if err := nm.SetStable([]byte(k), v); err != nil {
					return err
				}
			}
		}
		if t, err := w.GetUint64([]byte(keyCurrentTerm)); err == nil {
			term = max(term, t)
		}
	}
	var batch []*raft.Log
	err := forEachEntry(c.log, c.keep, func(l *raft.Log) error {
		term = max(term, l.Term)
		batch = append(batch, l)
		if len(batch) < 64 {
			return nil
		}
		err := w.StoreLogs(batch)
		batch = batch[:0]
		return err
	})
	if err == nil {
		err = w.StoreLogs(batch)
	}
	if err != nil {
		return err
	}
	// raft never lets its term fall behind the last entry's or snapshot's.
	if err := w.SetUint64([]byte(keyCurrentTerm), term); err != nil {
		return err
	}
	if len(c.keep) > 0 {
		return markCleanStop(nm, c.keep[len(c.keep)-1].index)
	}
	return nil
}

// raft's keys in the stable store.
const (
	keyCurrentTerm  = "CurrentTerm"
	keyLastVoteTerm = "LastVoteTerm"
	keyLastVoteCand = "LastVoteCand"
)

// forEachEntry reads the given entries of the log in order.
func forEachEntry(ls *logScan, entries []logEntry, fn func(*raft.Log) error) error {
	codec := &raftwal.BinaryCodec{}
	seg, data := -1, []byte(nil)
	for _, e := range entries {
		if e.seg != seg {
			var err error
			if data, err = os.ReadFile(ls.segs[e.seg].path); err != nil {
				return fmt.Errorf("cluster: read the log: %w", err)
			}
			seg = e.seg
		}
		n := int64(binary.LittleEndian.Uint32(data[e.off+4:]))
		l := new(raft.Log)
		if err := codec.Decode(data[e.off+frameHdrLen:e.off+frameHdrLen+n], l); err != nil {
			return fmt.Errorf("cluster: read entry %d: %w", e.index, err)
		}
		if err := fn(l); err != nil {
			return err
		}
	}
	return nil
}

func moveIfExists(from, to string) error {
	err := os.Rename(from, to)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cluster: move %s aside: %w", from, err)
	}
	return nil
}
