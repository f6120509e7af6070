package cluster

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

const testSegSize = 64 << 10

// openTestWAL opens the raft-wal log in dir as a node does: the check,
// then repairTail. closeWAL closes it and its meta store.
func openTestWAL(t *testing.T, dir string) (w *raftwal.WAL, closeWAL func()) {
	t.Helper()
	meta := &metadb.BoltMetaDB{}
	ls, err := scanLog(dir, meta)
	if err == nil && ls.damage != nil {
		err = ls.damage
	}
	if err == nil {
		_, err = repairTail(meta, testSegSize, ls)
	}
	if err != nil {
		meta.Close()
		t.Fatal(err)
	}
	w, err = raftwal.Open(dir, raftwal.WithMetaStore(meta), raftwal.WithSegmentSize(testSegSize))
	if err != nil {
		meta.Close()
		t.Fatal(err)
	}
	return w, func() { w.Close(); meta.Close() }
}

// testEntry is a no-op entry with a payload (the check decodes commands).
func testEntry(i uint64) *raft.Log {
	return &raft.Log{Index: i, Term: 1, Type: raft.LogNoop, Data: fmt.Appendf(nil, "entry %d %0500d", i, 0)}
}

// checkAppendAndRead appends entry last+1 and reads back 1..last+1.
func checkAppendAndRead(t *testing.T, w *raftwal.WAL, last uint64) {
	t.Helper()
	if err := w.StoreLogs([]*raft.Log{testEntry(last + 1)}); err != nil {
		t.Fatalf("append after reopening: %v", err)
	}
	for i := uint64(1); i <= last+1; i++ {
		var got raft.Log
		if err := w.GetLog(i, &got); err != nil || string(got.Data) != string(testEntry(i).Data) {
			t.Fatalf("entry %d after reopening: %v %.20q", i, err, got.Data)
		}
	}
}

// TestReopenAfterShortSealingWrite: an append that was to seal the segment
// and failed part way (a full disk) leaves an entry frame and an index
// frame after the last commit. Once reopened, the log accepts appends
// again and keeps every committed entry; raft-wal alone would take the
// segment for sealed and refuse every append ("segment is sealed").
func TestReopenAfterShortSealingWrite(t *testing.T) {
	dir := t.TempDir()
	func() {
		w, closeWAL := openTestWAL(t, dir)
		defer closeWAL()
		for i := uint64(1); i <= 10; i++ {
			if err := w.StoreLogs([]*raft.Log{testEntry(i)}); err != nil {
				t.Fatal(err)
			}
		}
	}()

	// What a short write of a sealing batch leaves: its entry frame and its
	// index frame, but not the commit frame that was to follow.
	f, err := os.OpenFile(onlySegment(t, dir), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	committed := fileScan(t, onlySegment(t, dir)).end
	var junk []byte
	junk = binary.LittleEndian.AppendUint32(append(junk, frameEntry, 0, 0, 0), 8)
	junk = append(junk, "uncommit"...)
	junk = binary.LittleEndian.AppendUint32(append(junk, frameIndex, 0, 0, 0), 8)
	junk = binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(junk, 32), uint32(committed))
	if _, err := f.WriteAt(junk, committed); err != nil {
		t.Fatal(err)
	}
	f.Close()

	w, closeWAL := openTestWAL(t, dir)
	defer closeWAL()
	checkAppendAndRead(t, w, 10)
}

// TestReopenAfterUnrecordedSeal: the append that filled a segment (with its
// index) committed, but recording the seal and the next segment in the
// metadata did not happen (it failed on the full disk, or the process
// died first). Once reopened, the log accepts appends and reads every
// entry, in the sealed segment too; raft-wal alone would refuse every
// append ("segment is sealed").
func TestReopenAfterUnrecordedSeal(t *testing.T) {
	dir := t.TempDir()
	var last uint64
	func() {
		w, closeWAL := openTestWAL(t, dir)
		defer closeWAL() // raft-wal may or may not have recorded the seal yet
		seg := onlySegment(t, dir)
		for sealed := false; !sealed; {
			last++
			if err := w.StoreLogs([]*raft.Log{testEntry(last)}); err != nil {
				t.Fatal(err)
			}
			sealed = sealsAt(fileScan(t, seg).writes)
			if last > 10000 {
				t.Fatal("the first segment never sealed")
			}
		}
	}()

	// Undo the metadata of the rotation, if it happened: the first segment
	// is open again, as before the sealing append.
	meta := &metadb.BoltMetaDB{}
	st, err := meta.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Segments) == 2 {
		st.Segments = st.Segments[:1]
		st.Segments[0].SealTime, st.Segments[0].IndexStart, st.Segments[0].MaxIndex = time.Time{}, 0, 0
		st.NextSegmentID--
		if err := meta.CommitState(st); err != nil {
			t.Fatal(err)
		}
	}
	meta.Close()
	if len(st.Segments) != 1 || !st.Segments[0].SealTime.IsZero() {
		t.Fatalf("metadata: %+v", st)
	}

	w, closeWAL := openTestWAL(t, dir)
	defer closeWAL()
	checkAppendAndRead(t, w, last)
	t.Logf("%d entries in the sealed segment", last)
}

// fileScan reads a segment file as the check does, its metadata taken
// from its own header (the log's metadata store may be open).
func fileScan(t *testing.T, path string) *segScan {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || len(b) < segHeaderLen {
		t.Fatalf("read %s: %v", path, err)
	}
	si := types.SegmentInfo{BaseIndex: binary.LittleEndian.Uint64(b[8:]), ID: binary.LittleEndian.Uint64(b[16:]), Codec: binary.LittleEndian.Uint64(b[24:])}
	if got := filepath.Join(filepath.Dir(path), segment.FileName(si)); got != path {
		t.Fatalf("%s: its header names %s", path, got)
	}
	return scanSegment(filepath.Dir(path), si)
}

// onlySegment returns the path of dir's one segment file.
func onlySegment(t *testing.T, dir string) string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments: %v %v", segs, err)
	}
	return segs[0]
}
