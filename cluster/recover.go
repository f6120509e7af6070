package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// RecoveryPlan is what Recover finds and will do to a stopped node's data
// dir.
type RecoveryPlan struct {
	// Damage is what is wrong; nil for an intact data dir (nothing to do).
	Damage *DamageError
	// Snapshots are damaged snapshots that will be moved aside.
	Snapshots []string
	// Snapshot is the index of the newest intact snapshot (0: none).
	Snapshot uint64
	// FirstIndex and LastGood bound the log entries kept (LastGood 0: none).
	FirstIndex, LastGood uint64
	// LostFrom is the first index that is lost (entries from there on,
	// as many as the log held, are gone).
	LostFrom uint64
	// Files are the log files moved (or, for the one cut, copied) aside.
	Files []string
	// TokenFloor is the saved floor: every token issued from now on is at
	// least this. FloorGuessed says there was none (a data dir written by an
	// older version) and Recover will save a generous one.
	TokenFloor   uint64
	FloorGuessed bool
	// Backup is the directory the damaged files go to.
	Backup string
	// Fresh says nothing of the state is left: the node starts again as a
	// new cluster (tokens still start at the floor).
	Fresh bool
}

// recoverFloorGuess is how far above the highest index it can see Recover
// puts a token floor that was never saved.
const recoverFloorGuess = 1 << 20

// Recover repairs a stopped node's damaged data dir so that it can start
// again: damaged snapshots are moved aside, and the log keeps its intact
// prefix (up to the first damage, or up to the newest intact snapshot if
// the log cannot follow on from it). Nothing is deleted: every file that
// is dropped or changed goes into the plan's Backup directory first. The
// token floor is kept, so no token is issued twice. confirm sees the plan
// before anything changes; Recover does nothing unless it returns true.
func Recover(dir string, confirm func(*RecoveryPlan) bool) (*RecoveryPlan, error) {
	walDir := filepath.Join(dir, "wal")
	if _, err := os.Stat(filepath.Join(walDir, metadb.FileName)); err != nil {
		return nil, fmt.Errorf("cluster: %s holds no leasehold log (%v)", dir, err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	meta := &metadb.BoltMetaDB{}
	defer meta.Close()
	plan, lc, err := planRecovery(dir, meta)
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
	if err := cutLog(walDir, meta, lc, plan); err != nil {
		return plan, err
	}
	if plan.FloorGuessed {
		f := &tokenFloor{dir: dir}
		if err := f.save(plan.TokenFloor); err != nil {
			return plan, err
		}
	}
	return plan, syncDir(dir)
}

// planRecovery verifies the data dir and works out what to keep.
func planRecovery(dir string, meta *metadb.BoltMetaDB) (*RecoveryPlan, *logCheck, error) {
	plan := &RecoveryPlan{Backup: filepath.Join(dir, "damaged-"+time.Now().UTC().Format("20060102T150405Z"))}
	snaps, err := listSnapshots(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, s := range snaps {
		if err := verifySnapshot(s.dir); err != nil {
			var de *DamageError
			if !errors.As(err, &de) {
				return nil, nil, err
			}
			plan.Damage = cmpOr(plan.Damage, de)
			plan.Snapshots = append(plan.Snapshots, s.dir)
			continue
		}
		plan.Snapshot = max(plan.Snapshot, s.index)
	}
	lc, err := verifyLog(filepath.Join(dir, "wal"), meta)
	var de *DamageError
	if err != nil && !errors.As(err, &de) {
		return nil, nil, err
	}
	if lc == nil {
		return nil, nil, err // the log's metadata itself is unreadable
	}
	plan.Damage = cmpOr(plan.Damage, de)
	plan.FirstIndex, plan.LastGood = lc.first, lc.lastGood
	if plan.FirstIndex > plan.Snapshot+1 && len(plan.Snapshots) > 0 {
		// The log starts after the newest intact snapshot: it cannot be
		// applied on top of it, so none of it is kept.
		plan.FirstIndex, plan.LastGood = 0, 0
		lc.segs, lc.damage = nil, &DamageError{}
	}
	if lc.damage != nil {
		plan.LostFrom = max(plan.LastGood, plan.Snapshot) + 1
		plan.Fresh = plan.LastGood == 0 && plan.Snapshot == 0
	}
	floor, err := ReadTokenFloor(dir)
	if err != nil {
		return nil, nil, err
	}
	if _, serr := os.Stat(filepath.Join(dir, TokenFloorFile)); errors.Is(serr, os.ErrNotExist) && plan.Damage != nil {
		plan.FloorGuessed = true
		floor = max(plan.LastGood, plan.Snapshot, highestSeen(lc)) + recoverFloorGuess
	}
	plan.TokenFloor = floor
	if lc.damage != nil {
		// The damaged segment first, then every later one.
		for i, s := range lc.state.Segments {
			if i >= len(lc.segs)-1 {
				plan.Files = append(plan.Files, filepath.Join(dir, "wal", segment.FileName(s)))
			}
		}
	}
	return plan, lc, nil
}

func cmpOr(a, b *DamageError) *DamageError {
	if a != nil {
		return a
	}
	return b
}

// highestSeen is the highest log index the damaged log shows, a lower
// bound for a floor that was never saved.
func highestSeen(lc *logCheck) uint64 {
	var hi uint64
	for _, s := range lc.state.Segments {
		hi = max(hi, s.MaxIndex, s.BaseIndex)
	}
	for _, sc := range lc.segs {
		hi = max(hi, sc.info.BaseIndex+uint64(len(sc.entries)))
	}
	return hi
}

// cutLog keeps the log's intact prefix: segments after the damaged one
// are moved aside, the damaged one is copied aside and cut after its last
// good write (becoming the open tail), and the log's metadata is
// rewritten to match. raft's own keys in the metadata store (term, vote)
// are kept.
func cutLog(walDir string, meta *metadb.BoltMetaDB, lc *logCheck, plan *RecoveryPlan) error {
	if lc.damage == nil {
		return nil
	}
	if err := copyFile(filepath.Join(walDir, metadb.FileName), filepath.Join(plan.Backup, metadb.FileName)); err != nil {
		return err
	}
	st := lc.state
	keep := append([]types.SegmentInfo(nil), st.Segments[:max(len(lc.segs)-1, 0)]...)
	cut := false // the damaged segment keeps its good writes
	if len(lc.segs) > 0 {
		sc := lc.segs[len(lc.segs)-1]
		si := sc.info
		if n := len(sc.writes); si.IndexStart > 0 && n > 0 && sc.goodEnd > int64(si.IndexStart)-frameHdrLen {
			// The last good write seals the segment with its index: drop it
			// too, so that the segment can be the open tail again.
			k := 0
			if n > 1 {
				k = sc.writes[n-2].entries
			}
			sc.cutAt(k)
		}
		if lo := max(si.MinIndex, si.BaseIndex); len(sc.entries) > 0 && si.BaseIndex+uint64(len(sc.entries))-1 >= lo {
			plan.LastGood = si.BaseIndex + uint64(len(sc.entries)) - 1
			if err := cutSegment(sc, plan.Backup); err != nil {
				return err
			}
			si.SealTime, si.IndexStart, si.MaxIndex = time.Time{}, 0, 0
			keep = append(keep, si)
			cut = true
		} else if len(keep) > 0 {
			plan.LastGood = keep[len(keep)-1].MaxIndex
		} else {
			plan.LastGood, plan.FirstIndex = 0, 0
		}
	}
	plan.LostFrom = max(plan.LastGood, plan.Snapshot) + 1
	plan.Fresh = len(keep) == 0 && plan.Snapshot == 0
	for i, f := range plan.Files {
		if i == 0 && cut {
			continue // copied aside by cutSegment
		}
		if err := moveIfExists(f, filepath.Join(plan.Backup, filepath.Base(f))); err != nil {
			return err
		}
	}
	if len(keep) > 0 && !keep[len(keep)-1].SealTime.IsZero() {
		// A sealed segment cannot be the tail: start an empty one after it.
		last := keep[len(keep)-1]
		keep = append(keep, types.SegmentInfo{ID: st.NextSegmentID, BaseIndex: last.MaxIndex + 1, MinIndex: last.MaxIndex + 1,
			SizeLimit: last.SizeLimit, Codec: last.Codec, CreateTime: time.Now()})
		st.NextSegmentID++
	}
	st.Segments = keep
	if err := meta.CommitState(st); err != nil {
		return fmt.Errorf("cluster: rewrite the log's metadata: %w", err)
	}
	if plan.Fresh {
		// Nothing is left to say who the voters are: forget raft's term and
		// vote too, so the node bootstraps again as a new cluster.
		for _, k := range []string{"CurrentTerm", "LastVoteTerm", "LastVoteCand"} {
			if err := meta.SetStable([]byte(k), nil); err != nil {
				return fmt.Errorf("cluster: reset raft's term: %w", err)
			}
		}
	}
	return syncDir(walDir)
}

// cutSegment copies the segment aside, then zeroes it after its last good
// write and brings it back to its full size, so raft-wal reopens it as a
// tail that ends there.
func cutSegment(sc segCheck, backup string) error {
	if err := copyFile(sc.path, filepath.Join(backup, filepath.Base(sc.path))); err != nil {
		return err
	}
	f, err := os.OpenFile(sc.path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("cluster: cut damaged segment: %w", err)
	}
	defer f.Close()
	size := max(sc.size, int64(sc.info.SizeLimit))
	if err := f.Truncate(sc.goodEnd); err == nil {
		err = f.Truncate(size)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return fmt.Errorf("cluster: cut damaged segment: %w", err)
	}
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("cluster: back up %s: %w", from, err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("cluster: back up %s: %w", from, err)
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if err = errors.Join(err, out.Close()); err != nil {
		return fmt.Errorf("cluster: back up %s: %w", from, err)
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

type snapInfo struct {
	dir   string
	index uint64
}

// listSnapshots lists the snapshot directories with the index each says
// it holds (0 if its metadata cannot be read).
func listSnapshots(dir string) ([]snapInfo, error) {
	root := filepath.Join(dir, "snapshots")
	ents, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: list snapshots: %w", err)
	}
	var out []snapInfo
	for _, e := range ents {
		if !e.IsDir() || filepath.Ext(e.Name()) == ".tmp" {
			continue
		}
		s := snapInfo{dir: filepath.Join(root, e.Name())}
		if b, err := os.ReadFile(filepath.Join(s.dir, "meta.json")); err == nil {
			var m struct{ Index uint64 }
			if json.Unmarshal(b, &m) == nil {
				s.index = m.Index
			}
		}
		out = append(out, s)
	}
	return out, nil
}
