package server

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fsm"
	"github.com/leasehold/leasehold/service"
)

// leases implements leaseholdv1connect.LeasesHandler.
type leases struct{ s *Server }

func (h leases) Acquire(ctx context.Context, req *connect.Request[pb.AcquireRequest]) (*connect.Response[pb.AcquireResponse], error) {
	s := h.s
	start := time.Now()
	cmd, secret, err := acquireCommand(req.Msg, caller(ctx))
	if err != nil {
		s.metrics.Acquisitions.WithLabelValues("invalid").Inc()
		return nil, err
	}
	if err := s.charge(ctx, 1); err != nil {
		return nil, err
	}
	// A forwarded copy must carry the request ID and secret chosen here.
	req.Msg.RequestId, req.Msg.Secret = cmd.Base().RequestID, secret
	res, err := s.svc.Acquire(ctx, cmd)
	if forwarding(req, err) {
		return nil, err // the leader answers, and counts it
	}
	out, err := s.acquireAnswer(secret, res, err, start)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

// acquireAnswer builds the reply to a granted acquire and counts the
// outcome; err (a failure of the whole call) or else res.Err is returned
// instead for one that failed. Acquire and Batch answer through it alike.
func (s *Server) acquireAnswer(secret string, res service.Result, err error, start time.Time) (*pb.AcquireResponse, error) {
	if err == nil {
		err = res.Err
	}
	if err != nil {
		s.metrics.Acquisitions.WithLabelValues(leasehold.CodeOf(err).String()).Inc()
		return nil, err
	}
	s.metrics.Acquisitions.WithLabelValues("granted").Inc()
	s.metrics.AcquireWait.Observe(time.Since(start).Seconds())
	if res.ForeignSecret {
		secret = "" // a retry with another secret: only the first request's holder knows it
	}
	return &pb.AcquireResponse{
		Lease:     leasePB(res.Lease, res.Remaining),
		Secret:    secret,
		ExpiresIn: durPB(res.Remaining),
	}, nil
}

func (h leases) Renew(ctx context.Context, req *connect.Request[pb.RenewRequest]) (*connect.Response[pb.RenewResponse], error) {
	s := h.s
	cmd, err := renewCommand(req.Msg, caller(ctx))
	if err != nil {
		s.metrics.RenewalFailures.WithLabelValues(leasehold.CodeInvalid.String()).Inc()
		return nil, err
	}
	req.Msg.RequestId = cmd.RequestID
	res, err := s.svc.Renew(ctx, cmd)
	if forwarding(req, err) {
		return nil, err // the leader answers, and counts it
	}
	out, err := s.renewAnswer(res, err)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

// renewAnswer is acquireAnswer for a renewal.
func (s *Server) renewAnswer(res service.Result, err error) (*pb.RenewResponse, error) {
	if err == nil {
		err = res.Err
	}
	if err != nil {
		s.metrics.RenewalFailures.WithLabelValues(leasehold.CodeOf(err).String()).Inc()
		return nil, err
	}
	return &pb.RenewResponse{
		Lease:     leasePB(res.Lease, res.Remaining),
		ExpiresIn: durPB(res.Remaining),
	}, nil
}

func (h leases) Release(ctx context.Context, req *connect.Request[pb.ReleaseRequest]) (*connect.Response[pb.ReleaseResponse], error) {
	s := h.s
	cmd, err := releaseCommand(req.Msg, caller(ctx))
	if err != nil {
		return nil, err
	}
	req.Msg.RequestId = cmd.RequestID
	res, err := s.svc.Release(ctx, cmd)
	if forwarding(req, err) {
		return nil, err // the leader answers, and counts it
	}
	out, err := s.releaseAnswer(cmd, res, err)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

// releaseAnswer is acquireAnswer for a release.
func (s *Server) releaseAnswer(cmd *service.Release, res service.Result, err error) (*pb.ReleaseResponse, error) {
	if err == nil {
		err = res.Err
	}
	if err != nil {
		if errors.Is(err, leasehold.ErrNotFound) {
			s.metrics.ReleasedAfterLoss.Inc()
			s.log.Warn("release found the lease gone: its holder worked past the lease", slog.Uint64("lease", cmd.LeaseID))
		}
		return nil, err
	}
	return &pb.ReleaseResponse{Lease: leasePB(res.Lease, -1)}, nil
}

func (h leases) Get(ctx context.Context, req *connect.Request[pb.GetRequest]) (*connect.Response[pb.GetResponse], error) {
	s := h.s
	r := req.Msg.Resource
	if err := fsm.ValidateForcedResource(r); err != nil { // leasehold's own names too
		return nil, err
	}
	now, err := s.svc.Holding(ctx, r)
	out := &pb.GetResponse{Resource: r, Holder: visibleLease(ctx, leasePB(now.Holder, now.ExpiresIn)),
		LockDelay: durPB(now.LockDelay), Limit: uint32(now.Limit)}
	for i := range now.Slots {
		out.Slots = append(out.Slots, visibleLease(ctx, leasePB(&now.Slots[i].Lease, now.Slots[i].ExpiresIn)))
	}
	for _, w := range now.Waiters {
		pw := waiterPB(w)
		pw.Resources = visible(ctx, pw.Resources)
		out.Waiters = append(out.Waiters, pw)
	}
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

func (h leases) List(ctx context.Context, req *connect.Request[pb.ListRequest]) (*connect.Response[pb.ListResponse], error) {
	s := h.s
	after, limit, err := listParams(req.Msg)
	if err != nil {
		return nil, err
	}
	page, more, err := s.svc.List(ctx, after, limit, req.Msg.Prefix)
	out := &pb.ListResponse{}
	for i := range page {
		out.Leases = append(out.Leases, visibleLease(ctx, leasePB(&page[i].Lease, page[i].ExpiresIn)))
	}
	if more {
		out.NextPageToken = strconv.FormatUint(page[len(page)-1].Lease.ID, 10)
	}
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}
