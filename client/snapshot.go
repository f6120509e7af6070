package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"connectrpc.com/connect"

	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
)

// SnapshotInfo describes a backup of a node's state (Snapshot).
type SnapshotInfo struct {
	Index     uint64 // the log index the state reflects
	Term      uint64 // the raft term when it was taken
	Format    int    // the state encoding's version
	Size      int64  // bytes of state
	SHA256    string // of the state, hex
	NodeID    string // the node that wrote it
	TakenAt   time.Time
	LastToken uint64 // the largest fencing token in it
}

// ErrSnapshotDamaged says a streamed state did not match its header's size
// or checksum: what was written must not be used.
var ErrSnapshotDamaged = errors.New("client: the snapshot stream does not match its checksum")

// Snapshot streams the whole state of the leader (admin role), as of one
// applied index, and checks it against the size and SHA-256 the node
// sends first: open gets that header (NodeID names the node that answered)
// and returns where the state goes. The leader is found by asking the
// configured nodes, and need not be one of them; when none names a leader
// (no quorum), the node in use answers, with a state that may lag. On an
// error, what that writer got is incomplete or damaged. It blocks until
// the whole state is written or ctx ends; until the header comes, it is
// bounded as a call is (Config.Timeout).
func (c *Client) Snapshot(ctx context.Context, open func(SnapshotInfo) (io.Writer, error)) (SnapshotInfo, error) {
	octx, stop := c.bound(ctx, 0)
	defer stop()
	admin := c.snapshotSource(octx)
	req := connect.NewRequest(&pb.SnapshotRequest{})
	if c.cfg.Token != "" { // the bearer interceptor covers unary calls only
		req.Header().Set("Authorization", "Bearer "+c.cfg.Token)
	}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	opened := opening(octx, "", 0, cancel)
	defer opened()
	s, err := admin.Snapshot(sctx, req)
	if err != nil {
		return SnapshotInfo{}, c.snapshotErr(octx, err)
	}
	defer s.Close()
	var info SnapshotInfo
	var w io.Writer
	h := sha256.New()
	var n int64
	for s.Receive() {
		opened()
		m := s.Msg()
		if hd := m.Header; hd != nil && w == nil {
			info = SnapshotInfo{Index: hd.Index, Term: hd.Term, Format: int(hd.Format), Size: int64(hd.Size), SHA256: hd.Sha256,
				NodeID: hd.NodeId, TakenAt: stamp(hd.TakenAt), LastToken: hd.LastToken}
			if w, err = open(info); err != nil {
				return info, err
			}
		}
		if len(m.Data) == 0 {
			continue
		}
		if w == nil {
			return info, fmt.Errorf("%w: state bytes came before the header", ErrSnapshotDamaged)
		}
		if _, err := w.Write(m.Data); err != nil {
			return info, err
		}
		h.Write(m.Data)
		n += int64(len(m.Data))
	}
	if err := s.Err(); err != nil {
		if w == nil {
			return info, c.snapshotErr(octx, err)
		}
		return info, api.FromConnect(err)
	}
	if w == nil {
		return info, fmt.Errorf("%w: no header came", ErrSnapshotDamaged)
	}
	if got := hex.EncodeToString(h.Sum(nil)); n != info.Size || got != info.SHA256 {
		return info, fmt.Errorf("%w: got %d bytes with SHA-256 %s, the node sent %d bytes with %s", ErrSnapshotDamaged, n, got, info.Size, info.SHA256)
	}
	return info, nil
}

// snapshotErr is the error of a Snapshot stream that failed before its
// header: the client's bound's if that ended it.
func (c *Client) snapshotErr(octx context.Context, err error) error {
	if octx.Err() != nil {
		return c.ended(octx, nil)
	}
	return api.FromConnect(err)
}
