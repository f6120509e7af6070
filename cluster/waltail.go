package cluster

import (
	"bytes"
	"encoding/binary"
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

// raft-wal v0.4.0 segment format: a 32-byte file header, then frames of an
// 8-byte header (type, 3 reserved bytes, little-endian length — or CRC for
// a commit frame) and a payload padded to 8 bytes. A batch is durable once
// its commit frame is written and synced; the batch that fills a segment
// carries an index frame (the entries' offsets) before its commit frame.
const (
	walFileHeaderLen  = 32
	walFrameHeaderLen = 8
	walFrameEntry     = 1
	walFrameIndex     = 2
	walFrameCommit    = 3
)

// repairTail mends what a failed write can leave in the log's open
// (unsealed) segment, which raft-wal v0.4.0 reopens as sealed and then
// refuses every append ("segment is sealed"), restart after restart:
//
//   - frames after the last commit frame, from an append that failed part
//     way (a short write on a full disk). raft-wal ignores uncommitted
//     entries but not an uncommitted index frame. They were never
//     acknowledged: they are zeroed.
//   - a committed index frame while the metadata still calls the segment
//     open: the sealing append succeeded but recording the seal (and the
//     next segment) in the metadata failed, or the process died between
//     the two. The seal is recorded now, as raft-wal would have, and
//     raftwal.Open creates the next segment.
//
// meta must not be open yet; it is left open for raftwal.Open.
func repairTail(walDir string, meta *metadb.BoltMetaDB, segSize int) error {
	st, err := meta.Load(walDir)
	if err != nil || len(st.Segments) == 0 {
		return err // raftwal.Open reports a meta store it cannot read
	}
	tail := st.Segments[len(st.Segments)-1]
	if !tail.SealTime.IsZero() {
		return nil
	}
	path := filepath.Join(walDir, segment.FileName(tail))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil // raftwal.Open creates it
	}
	if err != nil {
		return fmt.Errorf("cluster: open the log's last segment: %w", err)
	}
	defer f.Close()
	fr, err := scanFrames(f)
	if err != nil {
		return err
	}
	if fr.end > fr.committed {
		if _, err := f.WriteAt(make([]byte, fr.end-fr.committed), fr.committed); err != nil {
			return fmt.Errorf("cluster: clear the uncommitted end of %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("cluster: clear the uncommitted end of %s: %w", path, err)
		}
	}
	if fr.indexStart == 0 || fr.entries == 0 {
		return nil
	}
	now := time.Now()
	sealed := tail
	sealed.SealTime = now
	sealed.IndexStart = uint64(fr.indexStart)
	sealed.MaxIndex = tail.BaseIndex + uint64(fr.entries) - 1
	next := types.SegmentInfo{ID: st.NextSegmentID, BaseIndex: sealed.MaxIndex + 1, MinIndex: sealed.MaxIndex + 1,
		Codec: tail.Codec, SizeLimit: uint32(segSize), CreateTime: now}
	st.Segments = append(st.Segments[:len(st.Segments)-1], sealed, next)
	st.NextSegmentID++
	if err := meta.CommitState(st); err != nil {
		return fmt.Errorf("cluster: record the seal of %s: %w", path, err)
	}
	return nil
}

// tailFrames is what scanFrames found in a segment file.
type tailFrames struct {
	committed  int64 // end of the last commit frame (the file header if none)
	end        int64 // end of the last frame
	entries    int   // entry frames up to the last commit frame
	indexStart int64 // offset of a committed index's array, 0 if none
}

// scanFrames reads a segment's frame headers as raft-wal does: up to a
// zero or unknown header, or the end of the file.
func scanFrames(f io.ReaderAt) (tailFrames, error) {
	fr := tailFrames{committed: walFileHeaderLen}
	off := int64(walFileHeaderLen)
	entries, indexStart := 0, int64(0)
	var h [walFrameHeaderLen]byte
	for {
		n, err := f.ReadAt(h[:], off)
		if n < len(h) {
			if err != nil && err != io.EOF {
				return fr, fmt.Errorf("cluster: read the log's last segment: %w", err)
			}
			break
		}
		if h[0] != walFrameEntry && h[0] != walFrameIndex && h[0] != walFrameCommit || bytes.Equal(h[:], make([]byte, len(h))) {
			break
		}
		size := int64(walFrameHeaderLen)
		if h[0] != walFrameCommit {
			l := int64(binary.LittleEndian.Uint32(h[4:]))
			size += (l + walFrameHeaderLen - 1) &^ (walFrameHeaderLen - 1)
		}
		switch h[0] {
		case walFrameEntry:
			entries++
		case walFrameIndex:
			indexStart = off + walFrameHeaderLen
		case walFrameCommit:
			fr.committed, fr.entries, fr.indexStart = off+size, entries, indexStart
		}
		off += size
	}
	fr.end = max(fr.committed, off)
	return fr, nil
}
