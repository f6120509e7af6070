package cluster

import (
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/types"
)

// repairTail mends what a crash or a failed write can leave in the log's
// open (unsealed) segment, once checkDir found the log intact; ls is what
// it read. raft-wal v0.4.0 reopens some of it as sealed and then refuses
// every append ("segment is sealed"), restart after restart:
//
//   - bytes after the last write that verifies: an append that failed part
//     way (a short write on a full disk) or that a crash cut short. They
//     were never acknowledged, and nothing after them verifies (checkDir
//     made sure): they are zeroed. raft-wal ignores uncommitted entries but
//     not an uncommitted index frame.
//   - a committed index frame while the metadata still calls the segment
//     open: the sealing append succeeded but recording the seal (and the
//     next segment) in the metadata failed, or the process died between
//     the two. The seal is recorded now, as raft-wal would have, and
//     raftwal.Open creates the next segment.
//
// It returns what it zeroed ("" if nothing), for the node's log.
func repairTail(meta *metadb.BoltMetaDB, segSize int, ls *logScan) (string, error) {
	if ls == nil || len(ls.segs) == 0 {
		return "", nil
	}
	tail := ls.segs[len(ls.segs)-1]
	if tail.sealed() || tail.missing {
		return "", nil
	}
	var dropped string
	if tail.nz > tail.end {
		f, err := os.OpenFile(tail.path, os.O_RDWR, 0)
		if err != nil {
			return "", fmt.Errorf("cluster: open the log's last segment: %w", err)
		}
		_, err = f.WriteAt(make([]byte, tail.nz-tail.end), tail.end)
		if err == nil {
			err = f.Sync()
		}
		f.Close()
		if err != nil {
			return "", fmt.Errorf("cluster: clear the unfinished end of %s: %w", tail.path, err)
		}
		dropped = fmt.Sprintf("%s, bytes %d to %d", tail.path, tail.end, tail.nz)
	}
	if !sealsAt(tail.writes) {
		return dropped, nil
	}
	last := tail.writes[len(tail.writes)-1]
	now := time.Now()
	sealed := tail.info
	sealed.SealTime = now
	sealed.IndexStart = uint64(last.indexAt + frameHdrLen)
	sealed.MaxIndex = last.entries[len(last.entries)-1].index
	st := ls.state
	next := types.SegmentInfo{ID: st.NextSegmentID, BaseIndex: sealed.MaxIndex + 1, MinIndex: sealed.MaxIndex + 1,
		Codec: sealed.Codec, SizeLimit: uint32(segSize), CreateTime: now}
	st.Segments = append(append([]types.SegmentInfo(nil), st.Segments[:len(st.Segments)-1]...), sealed, next)
	st.NextSegmentID++
	if err := meta.CommitState(st); err != nil {
		return dropped, fmt.Errorf("cluster: record the seal of %s: %w", tail.path, err)
	}
	return dropped, nil
}
