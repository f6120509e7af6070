package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/hashicorp/raft-wal/metadb"
)

// rebuildDir, in the data dir, is where Recover writes the log it keeps
// before it puts it in the place of the damaged one.
const rebuildDir = "wal.recover"

// dirCheck is the verdict on a stopped node's data dir. Startup refuses
// every problem in it; Recover acts on the same verdict: what is damaged,
// up to which index the state can still be rebuilt, and what is lost.
type dirCheck struct {
	dir      string
	problems []*DamageError // the first first
	logBad   bool           // some problem is the log's: Recover rebuilds it
	snaps    []snapInfo     // the intact snapshots
	damaged  []snapInfo     // the damaged ones
	snapshot uint64         // the newest intact snapshot's index (0: none)
	log      *logScan       // nil: the data dir has no log yet
	floor    uint64         // the saved token floor
	floorBad bool           // the token floor file is damaged
	noFloor  bool           // there is no token floor file
	// cleanStop is the log's last index when the node last stopped
	// cleanly (0: it did not, or it is not recorded).
	cleanStop uint64
	// keep are the entries the state is rebuilt from: those that follow
	// on from the newest intact snapshot (or from index 1), as far as they
	// go without a gap. The state is intact up to intact; lostTo is the
	// highest index anything in the data dir shows.
	keep           []logEntry
	intact, lostTo uint64
	maybeMore      bool
}

// checkDir reads a stopped node's data dir whole. meta is the log's
// metadata store, opened here (left open for raft-wal).
func checkDir(dir string, meta *metadb.BoltMetaDB) (*dirCheck, error) {
	c := &dirCheck{dir: dir}
	if _, err := os.Stat(filepath.Join(dir, rebuildDir)); err == nil {
		c.addLog(&DamageError{File: filepath.Join(dir, rebuildDir), Offset: -1,
			Reason: "an interrupted `leasehold recover` left this half-built log: run it again"})
	}
	snaps, err := listSnapshots(dir)
	if err != nil {
		return nil, err
	}
	for _, s := range snaps {
		if err := verifySnapshot(s.dir); err != nil {
			var de *DamageError
			if !errors.As(err, &de) {
				return nil, err
			}
			c.add(de)
			c.damaged = append(c.damaged, s)
			continue
		}
		c.snaps = append(c.snaps, s)
		c.snapshot = max(c.snapshot, s.index)
	}
	if err := c.checkLog(meta, len(snaps)); err != nil {
		return nil, err
	}
	c.floor, err = ReadTokenFloor(dir)
	var de *DamageError
	if errors.As(err, &de) {
		c.add(de)
		c.floorBad = true
	} else if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, TokenFloorFile)); errors.Is(err, os.ErrNotExist) {
		c.noFloor = true
	}
	c.settle()
	return c, nil
}

// checkLog reads the log, if the data dir has one.
func (c *dirCheck) checkLog(meta *metadb.BoltMetaDB, snaps int) error {
	walDir := filepath.Join(c.dir, "wal")
	metaPath := filepath.Join(walDir, metadb.FileName)
	if _, err := os.Stat(metaPath); errors.Is(err, os.ErrNotExist) {
		// Loading it would make an empty one: a log that forgot its entries.
		segs, _ := filepath.Glob(filepath.Join(walDir, "*.wal"))
		if len(segs) == 0 && snaps == 0 {
			return nil // a new data dir
		}
		c.addLog(&DamageError{File: metaPath, Offset: -1, Reason: fmt.Sprintf(
			"the log's metadata is missing, but the data dir holds %d log segment files and %d snapshots", len(segs), snaps)})
		// What the segment files hold can still be kept; what else the
		// log held is not known.
		ls, err := scanLogFiles(walDir)
		c.log, c.maybeMore = ls, true
		return err
	} else if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	ls, err := scanLog(walDir, meta)
	var de *DamageError
	if errors.As(err, &de) {
		c.addLog(de) // the metadata cannot be read
		return nil
	} else if err != nil {
		return err
	}
	c.log = ls
	if ls.damage != nil {
		c.addLog(ls.damage)
	}
	c.cleanStop, err = readCleanStop(meta)
	return err
}

func (c *dirCheck) add(de *DamageError) { c.problems = append(c.problems, de) }

func (c *dirCheck) addLog(de *DamageError) {
	c.add(de)
	c.logBad = true
}

// settle works out what the state can be rebuilt to and what is lost, adds
// what raft would trip on (a log that does not go on from the snapshot; a
// log shorter than at the last clean stop), and tells every problem.
func (c *dirCheck) settle() {
	var entries []logEntry
	if c.log != nil {
		entries = c.log.entries
	}
	c.intact = c.snapshot
	if c.log != nil {
		if from, to, ok := c.log.run(c.snapshot + 1); ok {
			c.keep = entries[from : to+1]
			c.intact = entries[to].index
		}
	}
	// raft restores the newest snapshot, then reads every entry after it.
	next := sort.Search(len(entries), func(i int) bool { return entries[i].index > c.snapshot })
	if next < len(entries) && entries[next].index != c.snapshot+1 && !c.logBad {
		e := entries[next]
		c.addLog(&DamageError{File: filepath.Join(c.dir, "snapshots"), Offset: -1, Reason: fmt.Sprintf(
			"no snapshot there holds the entries before the log's first: the log (%s, byte %d) goes on at index %d, "+
				"the newest intact snapshot ends at index %d, so entries %d to %d are in neither",
			c.log.segs[e.seg].path, e.off, e.index, c.snapshot, c.snapshot+1, e.index-1)})
	}
	c.lostTo = max(c.intact, c.cleanStop)
	if c.log != nil {
		c.lostTo = max(c.lostTo, c.log.highest)
	}
	for _, s := range c.damaged {
		c.lostTo = max(c.lostTo, s.index)
	}
	if c.cleanStop > c.intact && !c.logBad {
		de := &DamageError{File: filepath.Join(c.dir, "wal"), Offset: -1}
		why := ""
		if n := len(c.log.segs); n > 0 {
			tail := c.log.segs[n-1]
			de.File, de.Offset = tail.path, tail.end
			if tail.torn {
				why = " (" + tail.damage.Reason + ")"
			}
		}
		de.Reason = fmt.Sprintf("the node stopped cleanly with its log at index %d, but the log now ends at index %d%s", c.cleanStop, c.intact, why)
		c.addLog(de)
	}
	// Unless the node stopped cleanly, damage at the log's very end may
	// have taken entries that nothing else shows.
	if c.cleanStop == 0 && c.log != nil && len(c.log.segs) > 0 {
		tail := c.log.segs[len(c.log.segs)-1]
		c.maybeMore = c.maybeMore || tail.damage != nil && !tail.torn && !tail.writesAfterDamage()
	}
	for _, de := range c.problems {
		de.DataDir, de.LastGood = c.dir, c.intact
		de.LostFrom, de.LostTo, de.MaybeMore = c.intact+1, c.lostTo, c.maybeMore
	}
}

// newestSnapshot is the newest intact snapshot, the one raft restores.
func (c *dirCheck) newestSnapshot() (snapInfo, bool) {
	for _, s := range c.snaps {
		if s.index == c.snapshot && s.index > 0 {
			return s, true
		}
	}
	return snapInfo{}, false
}

// snapshotTerm is the newest intact snapshot's term (0: none).
func (c *dirCheck) snapshotTerm() uint64 {
	s, _ := c.newestSnapshot()
	return s.term
}
