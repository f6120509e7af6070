package server

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/service"
)

// maxWatchPrefixes bounds the prefixes of one watch.
const maxWatchPrefixes = 64

// watchAPI implements leaseholdv1connect.WatchHandler. A node serves
// watches from its own applied log: no forwarding to the leader.
type watchAPI struct{ s *Server }

func (h watchAPI) Watch(ctx context.Context, req *connect.Request[pb.WatchRequest], stream *connect.ServerStream[pb.WatchResponse]) error {
	s, m := h.s, req.Msg
	wr, err := watchRequest(m)
	if err != nil {
		return api.ToConnect(err)
	}
	// The watch ends as soon as the server starts shutting down: a stream
	// would otherwise hold the shutdown up until its caller leaves.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.watching, cancel)
	defer stop()
	w, err := s.svc.Watch(ctx, wr)
	if err != nil {
		return api.ToConnect(err)
	}
	defer w.Close()
	last := w.Start()
	// The first message marks where the watch starts, so a caller that
	// sees no event before the node fails still knows where to resume.
	if err := stream.Send(&pb.WatchResponse{Index: last}); err != nil {
		return err
	}
	for b := range w.Batches() {
		if err := stream.Send(visibleBatch(ctx, batchPB(b))); err != nil {
			return err
		}
		last = b.Index
	}
	if s.watching.Err() != nil {
		return api.ToConnect(leasehold.Errorf(leasehold.CodeUnavailable,
			"this node is shutting down: resume the watch from index %d on another node", last))
	}
	if err := w.Err(); leasehold.CodeOf(err) != leasehold.CodeUnknown {
		return api.ToConnect(err)
	}
	return ctx.Err()
}

// watchRequest checks a watch request's prefixes (the guard holds a token
// to its own).
func watchRequest(m *pb.WatchRequest) (service.WatchRequest, error) {
	wr := service.WatchRequest{Prefixes: m.Prefixes, From: m.GetFromIndex(), Now: m.FromIndex == nil, Renewed: m.Renewed}
	if len(m.Prefixes) > maxWatchPrefixes {
		return wr, leasehold.Errorf(leasehold.CodeInvalid, "prefixes has %d entries; the limit is %d", len(m.Prefixes), maxWatchPrefixes)
	}
	all := len(m.Prefixes) == 0
	for i, p := range m.Prefixes {
		if err := leasehold.ValidateName(fmt.Sprintf("prefixes[%d]", i), p, leasehold.MaxResourceLen, false); err != nil {
			return wr, err
		}
		all = all || p == ""
	}
	if all {
		wr.Prefixes = nil
	}
	return wr, nil
}

// visibleBatch is b as the caller of ctx may see it: a lease's resources
// outside its prefixes are left out of its events.
func visibleBatch(ctx context.Context, b *pb.WatchResponse) *pb.WatchResponse {
	for _, e := range b.Events {
		e.Resources = visible(ctx, e.Resources)
	}
	return b
}

func batchPB(b service.Batch) *pb.WatchResponse {
	out := &pb.WatchResponse{Index: b.Index, Events: make([]*pb.WatchEvent, len(b.Events))}
	for i, e := range b.Events {
		out.Events[i] = &pb.WatchEvent{Index: e.Index, Kind: e.Kind, LeaseId: e.LeaseID, Token: e.Token,
			Resources: e.Resources, Owner: e.Owner, Operation: e.Operation, Key: e.Key, Value: e.Value, Version: e.Version,
			Reason: e.Reason}
	}
	return out
}
