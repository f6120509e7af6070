package cluster

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

// TestReopenAfterShortSealingWrite: an append that was to seal the segment
// and failed part way (a full disk) leaves an entry frame and an index
// frame after the last commit. Once reopened, the log accepts appends
// again and keeps every committed entry; raft-wal alone would take the
// segment for sealed and refuse every append ("segment is sealed").
func TestReopenAfterShortSealingWrite(t *testing.T) {
	dir := t.TempDir()
	open := func() (*raftwal.WAL, *metadb.BoltMetaDB) {
		t.Helper()
		meta := &metadb.BoltMetaDB{}
		if err := clearUncommittedTail(dir, meta); err != nil {
			t.Fatal(err)
		}
		w, err := raftwal.Open(dir, raftwal.WithMetaStore(meta), raftwal.WithSegmentSize(1<<20))
		if err != nil {
			t.Fatal(err)
		}
		return w, meta
	}
	entry := func(i uint64) *raft.Log {
		return &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte("entry")}
	}
	w, meta := open()
	for i := uint64(1); i <= 10; i++ {
		if err := w.StoreLogs([]*raft.Log{entry(i)}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	meta.Close()

	// What a short write of a sealing batch leaves: its entry frame and its
	// index frame, but not the commit frame that was to follow.
	segs, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments: %v %v", segs, err)
	}
	f, err := os.OpenFile(segs[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	end, _, err := uncommittedFrames(f)
	if err != nil {
		t.Fatal(err)
	}
	var junk []byte
	junk = binary.LittleEndian.AppendUint32(append(junk, walFrameEntry, 0, 0, 0), 8)
	junk = append(junk, "uncommit"...)
	junk = binary.LittleEndian.AppendUint32(append(junk, walFrameIndex, 0, 0, 0), 8)
	junk = binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(junk, 32), uint32(end))
	if _, err := f.WriteAt(junk, end); err != nil {
		t.Fatal(err)
	}
	f.Close()

	w, meta = open()
	defer meta.Close()
	defer w.Close()
	if err := w.StoreLogs([]*raft.Log{entry(11)}); err != nil {
		t.Fatalf("append after reopening: %v", err)
	}
	for i := uint64(1); i <= 11; i++ {
		var got raft.Log
		if err := w.GetLog(i, &got); err != nil || string(got.Data) != "entry" {
			t.Fatalf("entry %d after reopening: %v %q", i, err, got.Data)
		}
	}
}
