package cluster

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// logScan is what reading every segment of the log found.
type logScan struct {
	state types.PersistentState
	segs  []*segScan
	// entries are the entries the log holds, in index order: those of the
	// writes that verify, inside their segment's bounds (MinIndex after a
	// compaction, MaxIndex after a tail truncation).
	entries []logEntry
	damage  *DamageError // the first damage, in log order
	torn    *segScan     // the open segment, when a crash left its last write unfinished
	highest uint64       // the highest index the log shows anywhere: metadata or entries
	noMeta  bool         // read from the segment files alone: the metadata is gone
}

// logEntry is where an entry of the log is.
type logEntry struct {
	index, term uint64
	seg         int   // in segs
	off         int64 // its frame header's offset in that segment
}

// scanLog reads every segment of the log in walDir.
func scanLog(walDir string, meta *metadb.BoltMetaDB) (*logScan, error) {
	st, err := meta.Load(walDir)
	if err != nil {
		return nil, &DamageError{File: filepath.Join(walDir, metadb.FileName), Reason: err.Error()}
	}
	ls := &logScan{state: st}
	ls.read(walDir)
	return ls, nil
}

// scanLogFiles reads a log whose metadata is gone from its segment files
// alone, for Recover: each file's own header gives its base index and id
// (files whose header is damaged cannot be placed and are left out), and a
// later segment's entries replace an earlier one's from the same index on
// (a tail truncation).
func scanLogFiles(walDir string) (*logScan, error) {
	paths, err := filepath.Glob(filepath.Join(walDir, "*.wal"))
	if err != nil {
		return nil, fmt.Errorf("cluster: list the log's segments: %w", err)
	}
	ls := &logScan{noMeta: true}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("cluster: read %s: %w", p, err)
		}
		if len(b) < segHeaderLen || binary.LittleEndian.Uint32(b) != segMagic {
			continue
		}
		si := types.SegmentInfo{BaseIndex: binary.LittleEndian.Uint64(b[8:]), ID: binary.LittleEndian.Uint64(b[16:]),
			Codec: binary.LittleEndian.Uint64(b[24:]), SizeLimit: uint32(min(len(b), math.MaxUint32))}
		si.MinIndex = si.BaseIndex
		if filepath.Join(walDir, segment.FileName(si)) == p {
			ls.state.Segments = append(ls.state.Segments, si)
		}
	}
	slices.SortFunc(ls.state.Segments, func(a, b types.SegmentInfo) int { return cmp.Compare(a.ID, b.ID) })
	ls.read(walDir)
	return ls, nil
}

// read scans the segments the log's state lists.
func (ls *logScan) read(walDir string) {
	for i, si := range ls.state.Segments {
		sc := scanSegment(walDir, si)
		ls.segs = append(ls.segs, sc)
		lo, hi := max(si.MinIndex, si.BaseIndex), uint64(math.MaxUint64)
		if sc.sealed() && si.MaxIndex > 0 {
			hi = si.MaxIndex
			ls.highest = max(ls.highest, si.MaxIndex)
		}
		ls.highest = max(ls.highest, si.BaseIndex-1)
		if sc.torn {
			ls.torn = sc
		} else if sc.damage != nil {
			ls.fail(sc.damage)
		}
		for _, w := range sc.writes {
			for _, e := range w.entries {
				if e.index > hi {
					continue // dropped by a tail truncation
				}
				ls.highest = max(ls.highest, e.index)
				if e.index >= lo {
					ls.add(logEntry{index: e.index, term: e.term, seg: i, off: e.off}, sc, lo)
				}
			}
		}
		if last := ls.last(); sc.sealed() && si.MaxIndex > 0 && last < si.MaxIndex && sc.damage == nil {
			ls.fail(&DamageError{File: sc.path, Offset: sc.end, Reason: fmt.Sprintf(
				"the sealed segment should hold entries up to index %d but ends at %d", si.MaxIndex, last)})
		}
	}
}

func (ls *logScan) fail(de *DamageError) {
	if ls.damage == nil {
		ls.damage = de
	}
}

// add appends an entry, checking that it follows on from the one before
// (or from lo, the first index its segment should hold).
func (ls *logScan) add(e logEntry, sc *segScan, lo uint64) {
	want := lo
	if n := len(ls.entries); n > 0 && e.index <= ls.entries[n-1].index {
		if !ls.noMeta {
			return // out of order: damage, reported where it broke the order
		}
		// A later segment rewrote the log from this index on.
		ls.entries = ls.entries[:sort.Search(n, func(i int) bool { return ls.entries[i].index >= e.index })]
	}
	if n := len(ls.entries); n > 0 {
		want = ls.entries[n-1].index + 1
	}
	if e.index != want && sc.damage == nil {
		ls.fail(&DamageError{File: sc.path, Offset: e.off, Reason: fmt.Sprintf(
			"entries %d to %d are missing: the log goes on at %d", want, e.index-1, e.index)})
	}
	ls.entries = append(ls.entries, e)
}

// first and last are the first and last index the log holds (0: none).
func (ls *logScan) first() uint64 {
	if len(ls.entries) == 0 {
		return 0
	}
	return ls.entries[0].index
}

func (ls *logScan) last() uint64 {
	if len(ls.entries) == 0 {
		return 0
	}
	return ls.entries[len(ls.entries)-1].index
}

// run returns the contiguous stretch of entries that holds index (from
// and to are indexes into entries), or ok false if the log lacks it.
func (ls *logScan) run(index uint64) (from, to int, ok bool) {
	p := sort.Search(len(ls.entries), func(i int) bool { return ls.entries[i].index >= index })
	if p == len(ls.entries) || ls.entries[p].index != index {
		return 0, 0, false
	}
	from, to = p, p
	for from > 0 && ls.entries[from-1].index == ls.entries[from].index-1 {
		from--
	}
	for to+1 < len(ls.entries) && ls.entries[to+1].index == ls.entries[to].index+1 {
		to++
	}
	return from, to, true
}
