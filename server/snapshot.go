package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
)

// snapshotChunk is the most state bytes one SnapshotResponse carries.
const snapshotChunk = 1 << 20

// Snapshot streams this node's state for a backup: a header with the
// index, term, size and SHA-256, then the bytes. The state is encoded once
// and the messages are slices of it, so the node holds the state and one
// encoding of it, never a second copy.
func (a *adminAPI) Snapshot(ctx context.Context, _ *connect.Request[pb.SnapshotRequest], stream *connect.ServerStream[pb.SnapshotResponse]) error {
	b := a.s.svc.Backup()
	sum := sha256.Sum256(b.State)
	var format uint32
	if len(b.State) > 6 {
		format = uint32(b.State[6]) // after the "LHSNAP" magic
	}
	head := &pb.SnapshotHeader{Index: b.Index, Term: b.Term, Format: format, Size: uint64(len(b.State)),
		Sha256: hex.EncodeToString(sum[:]), NodeId: a.s.fwd.selfID, TakenAt: timestamppb.New(time.Now()), LastToken: b.LastToken}
	if err := stream.Send(&pb.SnapshotResponse{Header: head}); err != nil {
		return err
	}
	for off := 0; off < len(b.State); off += snapshotChunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := stream.Send(&pb.SnapshotResponse{Data: b.State[off:min(off+snapshotChunk, len(b.State))]}); err != nil {
			return err
		}
	}
	return nil
}
