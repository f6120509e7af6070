package server

import (
	"context"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/service"
)

// adminAPI implements leaseholdv1connect.AdminHandler: inspection, forced
// release and the audit log. Roles are checked by the guard interceptor
// (auth.go), not here.
type adminAPI struct{ s *Server }

// Health marks (see Lock in admin.proto).
const (
	// progressStaleTTLs: a progress note older than this many TTLs is stale.
	progressStaleTTLs = 3
)

func (h *adminAPI) Locks(ctx context.Context, req *connect.Request[pb.LocksRequest]) (*connect.Response[pb.LocksResponse], error) {
	s, m := h.s, req.Msg
	after, limit, err := locksParams(m)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := &pb.LocksResponse{}
	if m.Resource != "" {
		l, err := s.svc.Lock(ctx, m.Resource)
		if err != nil {
			return nil, err
		}
		out.Locks = []*pb.Lock{visibleLock(ctx, lockPB(now, l, true))}
		return connect.NewResponse(out), nil
	}
	locks, next, err := s.svc.Locks(ctx, after, limit, m.Prefix)
	if err != nil {
		return nil, err
	}
	for _, l := range locks {
		out.Locks = append(out.Locks, visibleLock(ctx, lockPB(now, l, false)))
	}
	if next != 0 {
		out.NextPageToken = strconv.FormatUint(next, 10)
	}
	return connect.NewResponse(out), nil
}

func locksParams(m *pb.LocksRequest) (after uint64, limit int, err error) {
	if m.Resource != "" {
		if err := leasehold.ValidateForcedResource(m.Resource); err != nil { // leasehold's own names too
			return 0, 0, err
		}
	}
	if m.Resource != "" && (m.Prefix != "" || m.PageSize != 0 || m.PageToken != "") {
		return 0, 0, leasehold.Errorf(leasehold.CodeInvalid,
			"resource names one resource: give it without prefix, page_size or page_token")
	}
	return listParams(&pb.ListRequest{Prefix: m.Prefix, PageSize: m.PageSize, PageToken: m.PageToken})
}

// visibleLock is l as the caller of ctx may see it (scope.go).
func visibleLock(ctx context.Context, l *pb.Lock) *pb.Lock {
	l.LeaseResources = visible(ctx, l.LeaseResources)
	for _, w := range l.WaiterList {
		w.Resources = visible(ctx, w.Resources)
	}
	return l
}

// lockPB describes a lock as an operator sees it; wall times only serve
// display. full adds the waiter list and the lock delay.
func lockPB(now time.Time, lk service.Lock, full bool) *pb.Lock {
	out := &pb.Lock{Resource: lk.Resource}
	ws := lk.Waiters
	out.Waiters = uint32(len(ws))
	if len(ws) > 0 {
		oldest := ws[0].QueuedAt
		for _, w := range ws[1:] {
			if w.QueuedAt.Before(oldest) {
				oldest = w.QueuedAt
			}
		}
		out.OldestWait = durationpb.New(max(0, now.Sub(oldest)))
	}
	if full {
		for _, w := range ws {
			out.WaiterList = append(out.WaiterList, &pb.QueuedWaiter{
				Resources: slices.Clone(w.Resources), Owner: w.Owner, Operation: w.Operation,
				Wait: durPB(w.Wait), QueuedAt: timePB(w.QueuedAt), Waiting: durationpb.New(max(0, now.Sub(w.QueuedAt))),
			})
		}
		out.LockDelay = durPB(lk.LockDelay)
	}
	l := lk.Holder
	if l == nil {
		return out
	}
	out.LeaseId, out.Owner, out.Operation, out.Token = l.ID, l.Owner, l.Operation, l.Token
	out.LeaseResources = slices.Clone(l.Resources)
	out.Metadata = maps.Clone(l.Metadata)
	out.AcquiredAt, out.RenewedAt = timePB(l.AcquiredAt), timePB(l.RenewedAt)
	out.Ttl, out.MaxHold = durPB(l.TTL), durPB(l.MaxHold)
	out.RenewCount = l.RenewCount
	out.Progress, out.ProgressAt = l.Progress, timePB(l.ProgressAt)
	out.HeldFor = durationpb.New(lk.HeldFor)
	if lk.ExpiresKnown {
		out.ExpiresIn = durationpb.New(lk.ExpiresIn)
	}
	out.RenewalOverdue = lk.ExpiresKnown && renewalOverdue(l, lk.HeldFor, lk.ExpiresIn)
	out.ProgressStale = l.Progress != "" && !l.ProgressAt.IsZero() && now.Sub(l.ProgressAt) > progressStaleTTLs*l.TTL
	return out
}

// renewalOverdue: no successful renewal for more than half the TTL. A
// renewal restarts the countdown at the TTL, so that is a countdown below
// TTL/2 on a lease older than TTL/2. A lease within TTL/2 of its max hold
// cannot be renewed past it, so its short countdown is no sign of trouble.
func renewalOverdue(l *leasehold.Lease, held, left time.Duration) bool {
	half := l.TTL / 2
	if l.MaxHold > 0 && l.MaxHold-(held+left) < half {
		return false
	}
	return held > half && left < half
}

func (h *adminAPI) ForceRelease(ctx context.Context, req *connect.Request[pb.ForceReleaseRequest]) (*connect.Response[pb.ForceReleaseResponse], error) {
	s, m := h.s, req.Msg
	actor := Identity(ctx)
	cmd, err := forceReleaseRequest(m, actor)
	if err != nil {
		return nil, err
	}
	// A forwarded copy must carry the request ID chosen here; the leader
	// authenticates the caller again from the forwarded credentials.
	m.RequestId = cmd.RequestID
	res, err := s.svc.ForceRelease(ctx, cmd)
	if forwarding(req, err) {
		return nil, err // the leader answers, and counts it
	}
	if err != nil {
		s.log.Info("forced release refused", "actor", actor, "resource", cmd.Resource,
			slog.Uint64("lease", cmd.LeaseID), "err", err)
		return nil, err
	}
	if !res.Dup { // a retry was logged and counted the first time
		s.metrics.ForcedReleases.Inc()
		s.log.Warn("forced release: the holder may still be writing; only fenced resources are safe from it",
			"actor", actor, "reason", cmd.Reason, "resource", cmd.Resource,
			slog.Uint64("lease", res.Lease.ID), slog.Uint64("token", res.Lease.Token),
			"owner", res.Lease.Owner, "operation", res.Lease.Operation)
	}
	return connect.NewResponse(&pb.ForceReleaseResponse{Lease: leasePB(res.Lease, -1)}), nil
}

// forceReleaseRequest checks a ForceReleaseRequest of actor (who the
// service records as the caller of the request's context).
func forceReleaseRequest(m *pb.ForceReleaseRequest, actor string) (*service.ForceReleaseRequest, error) {
	if err := leasehold.ValidateForcedResource(m.Resource); err != nil {
		return nil, err
	}
	if m.LeaseId == 0 {
		return nil, leasehold.Errorf(leasehold.CodeInvalid,
			"lease_id must be set: the id of the lease seen holding the resource (leasehold locks show RESOURCE), so a newer holder is never released by mistake")
	}
	if m.Reason == "" {
		return nil, leasehold.Errorf(leasehold.CodeInvalid,
			"reason must say why the release is forced (1 to %d bytes); it is kept in the audit log", leasehold.MaxReasonLen)
	}
	if err := leasehold.ValidateName("reason", m.Reason, leasehold.MaxReasonLen, true); err != nil {
		return nil, err
	}
	if err := leasehold.ValidateName("actor", actor, leasehold.MaxOwnerLen, true); err != nil {
		return nil, err
	}
	id, err := requestID(m.RequestId)
	if err != nil {
		return nil, err
	}
	return &service.ForceReleaseRequest{RequestID: id, Resource: m.Resource, LeaseID: m.LeaseId, Reason: m.Reason}, nil
}

func (h *adminAPI) Audit(ctx context.Context, req *connect.Request[pb.AuditRequest]) (*connect.Response[pb.AuditResponse], error) {
	s, m := h.s, req.Msg
	since, limit, err := auditParams(m)
	if err != nil {
		return nil, err
	}
	p := principalOf(ctx)
	ask := limit
	if p.limited() {
		ask = math.MaxInt // the newest limit of those it may see
	}
	recs, truncated, err := s.svc.Audit(ctx, since, ask)
	if err != nil {
		return nil, err
	}
	if p.limited() {
		recs = slices.DeleteFunc(recs, func(a leasehold.AuditRecord) bool { return !p.allows(a.Resource) })
		if truncated = len(recs) > limit; truncated {
			recs = recs[len(recs)-limit:]
		}
	}
	out := &pb.AuditResponse{Truncated: truncated}
	for _, a := range recs {
		out.Records = append(out.Records, &pb.AuditRecord{
			Index: a.Index, Time: timePB(a.Time), Actor: a.Actor, Action: a.Action, Resource: a.Resource,
			LeaseId: a.LeaseID, Token: a.Token, Owner: a.Owner, Operation: a.Operation, Reason: a.Reason,
		})
	}
	return connect.NewResponse(out), nil
}

func auditParams(m *pb.AuditRequest) (since time.Duration, limit int, err error) {
	if since, err = duration("since", m.Since, 0); err != nil {
		return 0, 0, err
	}
	if since < 0 {
		return 0, 0, leasehold.Errorf(leasehold.CodeInvalid, "since is %v; it must not be negative", since)
	}
	switch {
	case m.Limit < 0 || m.Limit > leasehold.MaxListLimit:
		return 0, 0, leasehold.Errorf(leasehold.CodeInvalid, "limit is %d; it must be between 1 and %d", m.Limit, leasehold.MaxListLimit)
	case m.Limit == 0:
		limit = leasehold.DefaultListLimit
	default:
		limit = int(m.Limit)
	}
	return since, limit, nil
}
