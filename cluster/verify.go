package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft-wal/metadb"
)

// raft-wal checks only the last write of the log when it opens it: a
// damaged byte anywhere else is read back as if it were data (raft then
// panics applying it), and a damaged frame header ends the log early, so
// the entries after it vanish. hashicorp/raft in turn panics when the log
// does not go on from the snapshot it restores. So before raft starts,
// the whole data dir is checked (checkDir): every snapshot's checksum,
// every write of every segment, that every entry decodes, the sealed
// segments' index frames, that the entries follow on from each other and
// from the newest snapshot, and that the log still reaches where it was
// when the node last stopped cleanly. Only the open segment's unfinished
// last write, with nothing that verifies after it, is read as the end of
// the log: that is what a crash in the middle of an append leaves, and
// the append was never acknowledged.

// DamageError says where a data dir is damaged and what of it is lost.
// The node refuses to start with it.
type DamageError struct {
	File     string // the damaged file
	Offset   int64  // byte offset of the damage in File (-1: the file as a whole)
	Reason   string
	Snapshot bool   // File is a snapshot, not the log
	DataDir  string // the node's data dir
	// LastGood is the index up to which the data dir's state is intact
	// (from its newest intact snapshot and the log that follows it).
	LastGood uint64
	// LostFrom to LostTo are the entries this data dir can no longer give
	// (none if LostTo < LostFrom); MaybeMore says the damage is at the
	// log's end, so more entries may have been in the damaged bytes.
	LostFrom, LostTo uint64
	MaybeMore        bool
}

// Lost is how many entries are known to be lost.
func (e *DamageError) Lost() uint64 {
	if e.LostFrom == 0 || e.LostTo < e.LostFrom {
		return 0
	}
	return e.LostTo - e.LostFrom + 1
}

// What says what is damaged and what is lost, without the advice.
func (e *DamageError) What() string { return e.Where() + "; " + e.Loss() }

// Where says what is damaged.
func (e *DamageError) Where() string {
	what := fmt.Sprintf("the log is damaged in %s at byte %d: %s", e.File, e.Offset, e.Reason)
	switch {
	case e.Snapshot:
		what = fmt.Sprintf("snapshot %s is damaged: %s", e.File, e.Reason)
	case e.Offset < 0:
		what = fmt.Sprintf("%s: %s", e.File, e.Reason)
	}
	return what
}

// Loss says which entries are lost.
func (e *DamageError) Loss() string {
	switch {
	case e.Lost() > 0 && e.MaybeMore:
		return fmt.Sprintf("entries %d to %d (%d), and any after them the damage took, cannot be read from this data dir, which is intact up to index %d",
			e.LostFrom, e.LostTo, e.Lost(), e.LastGood)
	case e.Lost() > 0:
		return fmt.Sprintf("entries %d to %d (%d) cannot be read from this data dir, which is intact up to index %d",
			e.LostFrom, e.LostTo, e.Lost(), e.LastGood)
	case e.MaybeMore:
		return fmt.Sprintf("the data dir is intact up to index %d; any entries after it the damage took are lost", e.LastGood)
	}
	return fmt.Sprintf("no entry is lost: the data dir is intact up to index %d", e.LastGood)
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("cluster: %s. Refusing to start: in a cluster, remove this node (`leasehold cluster remove ID`), "+
		"empty its data dir (or run `leasehold recover --data-dir %s --removed`) and start it with --join; on a single node, "+
		"`leasehold recover --data-dir %s` keeps what is intact: see docs/failure-semantics.md",
		e.What(), e.DataDir, e.DataDir)
}

// verifyDataDir checks the data dir before the node opens its stores and
// returns the first damage, if any. meta is the log's metadata store
// (opened here).
func verifyDataDir(dir string, meta *metadb.BoltMetaDB) (*dirCheck, error) {
	c, err := checkDir(dir, meta)
	if err != nil {
		return nil, err
	}
	if len(c.problems) > 0 {
		return c, c.problems[0]
	}
	return c, nil
}

// verifySnapshot checks a snapshot's state against the checksum in its
// metadata, as raft does when it opens one, but before raft starts: raft
// logs the two checksums as raw bytes and falls back to an older snapshot,
// whose log entries may be gone.
func verifySnapshot(snapDir string) error {
	metaPath := filepath.Join(snapDir, "meta.json")
	statePath := filepath.Join(snapDir, "state.bin")
	b, err := os.ReadFile(metaPath)
	if err != nil {
		return &DamageError{Snapshot: true, File: metaPath, Reason: fmt.Sprintf("cannot read it: %v", err)}
	}
	var meta struct{ CRC []byte }
	if err := json.Unmarshal(b, &meta); err != nil {
		return &DamageError{Snapshot: true, File: metaPath, Reason: fmt.Sprintf("its metadata is not valid JSON: %v", err)}
	}
	f, err := os.Open(statePath)
	if err != nil {
		return &DamageError{Snapshot: true, File: statePath, Reason: fmt.Sprintf("cannot read it: %v", err)}
	}
	defer f.Close()
	h := crc64.New(crc64.MakeTable(crc64.ECMA))
	if _, err := io.Copy(h, f); err != nil {
		return &DamageError{Snapshot: true, File: statePath, Reason: fmt.Sprintf("cannot read it: %v", err)}
	}
	if got := h.Sum(nil); !bytes.Equal(got, meta.CRC) {
		return &DamageError{Snapshot: true, File: statePath, Reason: fmt.Sprintf(
			"its checksum is %x, but %s records %x", got, filepath.Base(metaPath), meta.CRC)}
	}
	return nil
}

type snapInfo struct {
	dir         string
	index, term uint64
}

// listSnapshots lists the snapshot directories with the index and term
// each says it holds (0 if its metadata cannot be read).
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
			var m struct{ Index, Term uint64 }
			if json.Unmarshal(b, &m) == nil {
				s.index, s.term = m.Index, m.Term
			}
		}
		out = append(out, s)
	}
	return out, nil
}
