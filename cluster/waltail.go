package cluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
)

// raft-wal v0.4.0 segment format: a 32-byte file header, then frames of an
// 8-byte header (type, 3 reserved bytes, little-endian length — or CRC for
// a commit frame) and a payload padded to 8 bytes. A batch is durable once
// its commit frame is written and synced.
const (
	walFileHeaderLen  = 32
	walFrameHeaderLen = 8
	walFrameEntry     = 1
	walFrameIndex     = 2
	walFrameCommit    = 3
)

// clearUncommittedTail zeroes the frames after the last commit frame of
// the log's open (unsealed) segment, if any. They are what an append that
// failed part way (a full disk: a short write) left behind, never
// acknowledged. raft-wal ignores uncommitted entries when it reopens the
// segment, but not an uncommitted index frame: a batch that was to seal
// the segment leaves one, and raft-wal then takes the segment for sealed
// and refuses every append ("segment is sealed"), restart after restart.
// meta must not be open yet; it is left open for raftwal.Open.
func clearUncommittedTail(walDir string, meta *metadb.BoltMetaDB) error {
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
	from, to, err := uncommittedFrames(f)
	if err != nil || from == to {
		return err
	}
	if _, err := f.WriteAt(make([]byte, to-from), from); err != nil {
		return fmt.Errorf("cluster: clear the uncommitted end of %s: %w", path, err)
	}
	return f.Sync()
}

// uncommittedFrames returns the byte range of the frames after the last
// commit frame, reading as raft-wal does: up to a zero or unknown header
// or the end of the file.
func uncommittedFrames(f io.ReaderAt) (from, to int64, err error) {
	from = walFileHeaderLen // no commit yet: the first batch was not written
	off := int64(walFileHeaderLen)
	var h [walFrameHeaderLen]byte
	for {
		n, err := f.ReadAt(h[:], off)
		if n < len(h) {
			if err != nil && err != io.EOF {
				return 0, 0, fmt.Errorf("cluster: read the log's last segment: %w", err)
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
		off += size
		if h[0] == walFrameCommit {
			from = off
		}
	}
	return from, max(from, off), nil
}
