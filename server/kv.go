package server

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/service"
)

// kvAPI implements leaseholdv1connect.KVHandler.
type kvAPI struct{ s *Server }

func keyOf(k string) error { return leasehold.ValidateName("key", k, leasehold.MaxKeyLen, true) }

// writtenKeyOf checks a key a caller writes: none is under
// leasehold.ReservedPrefix.
func writtenKeyOf(k string) error {
	if err := keyOf(k); err != nil {
		return err
	}
	return leasehold.Reserved("key", k)
}

// writeParams checks what Put and Delete share: the key, the fence and the
// request ID (made if empty).
func writeParams(key string, f *pb.Fence, reqID string) (*leasehold.Fence, string, error) {
	if err := writtenKeyOf(key); err != nil {
		return nil, "", err
	}
	fence, err := fencePB(f, "fence.")
	if err != nil {
		return nil, "", err
	}
	id, err := requestID(reqID)
	return fence, id, err
}

func (h kvAPI) Put(ctx context.Context, req *connect.Request[pb.PutRequest]) (*connect.Response[pb.PutResponse], error) {
	s, m := h.s, req.Msg
	cmd := &service.PutRequest{Key: m.Key, Value: m.Value, HasIfVersion: m.IfVersion != nil, IfVersion: m.GetIfVersion()}
	var err error
	if len(m.Value) > leasehold.MaxValueBytes {
		err = leasehold.Errorf(leasehold.CodeInvalid, "value is %d bytes; the limit is %d", len(m.Value), leasehold.MaxValueBytes)
	} else {
		cmd.Fence, cmd.RequestID, err = writeParams(m.Key, m.Fence, m.RequestId)
	}
	if err != nil {
		return nil, err
	}
	if cmd.Lease, err = leaseProof("put", m.LeaseId, m.LeaseSecret); err != nil {
		return nil, err
	}
	m.RequestId = cmd.RequestID
	version, err := s.svc.Put(ctx, cmd)
	if err = s.fenceResult(err, "put"); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.PutResponse{Version: version}), nil
}

func (h kvAPI) Delete(ctx context.Context, req *connect.Request[pb.DeleteRequest]) (*connect.Response[pb.DeleteResponse], error) {
	s, m := h.s, req.Msg
	cmd := &service.DeleteRequest{Key: m.Key, HasIfVersion: m.IfVersion != nil, IfVersion: m.GetIfVersion()}
	var err error
	if cmd.Fence, cmd.RequestID, err = writeParams(m.Key, m.Fence, m.RequestId); err != nil {
		return nil, err
	}
	m.RequestId = cmd.RequestID
	version, err := s.svc.Delete(ctx, cmd)
	if err = s.fenceResult(err, "delete"); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.DeleteResponse{Version: version}), nil
}

// fenceResult counts a refused fence.
func (s *Server) fenceResult(err error, op string) error {
	if errors.Is(err, leasehold.ErrStaleToken) {
		s.metrics.FenceRejections.WithLabelValues(op).Inc()
	}
	return err
}

func (h kvAPI) Get(ctx context.Context, req *connect.Request[pb.KVGetRequest]) (*connect.Response[pb.KVGetResponse], error) {
	s := h.s
	if err := keyOf(req.Msg.Key); err != nil {
		return nil, err
	}
	it, err := s.svc.Get(ctx, req.Msg.Key)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.KVGetResponse{Value: it.Value, Version: it.Version, LeaseId: it.Lease}), nil
}

func (h kvAPI) CheckFence(ctx context.Context, req *connect.Request[pb.CheckFenceRequest]) (*connect.Response[pb.CheckFenceResponse], error) {
	s := h.s
	m := req.Msg
	f, err := fencePB(&pb.Fence{Resource: m.Resource, Token: m.Token, Group: m.Group, Partition: m.Partition,
		Queue: m.Queue, Key: m.Key}, "")
	if err != nil {
		return nil, err
	}
	err = s.svc.CheckFence(ctx, *f)
	if err = s.fenceResult(err, "check"); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.CheckFenceResponse{}), nil
}

func (h kvAPI) List(ctx context.Context, req *connect.Request[pb.KVListRequest]) (*connect.Response[pb.KVListResponse], error) {
	m := req.Msg
	if err := leasehold.ValidateName("prefix", m.Prefix, leasehold.MaxKeyLen, false); err != nil {
		return nil, err
	}
	limit, err := pageSize(m.PageSize)
	if err != nil {
		return nil, err
	}
	if m.PageToken != "" && keyOf(m.PageToken) != nil {
		return nil, leasehold.Errorf(leasehold.CodeInvalid, "page_token is not one this server issued")
	}
	items, more, err := h.s.svc.ListKeys(ctx, m.Prefix, m.PageToken, limit)
	if err != nil {
		return nil, err
	}
	out := &pb.KVListResponse{Items: make([]*pb.KVItem, len(items))}
	for i, it := range items {
		out.Items[i] = &pb.KVItem{Key: it.Key, Value: it.Value, Version: it.Version, LeaseId: it.Lease}
	}
	if more && len(items) > 0 {
		out.NextPageToken = items[len(items)-1].Key
	}
	return connect.NewResponse(out), nil
}
