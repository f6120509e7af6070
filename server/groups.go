package server

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fsm"
	"github.com/leasehold/leasehold/service"
)

// GroupsService is what the partition group handlers call (implemented
// by *service.Service), apart from Service so that handler tests' fakes
// of Service need not grow.
type GroupsService interface {
	GroupCommand(ctx context.Context, cmd service.Command) (service.Result, error)
	Group(ctx context.Context, name string) (service.GroupDetail, map[uint64]time.Duration, bool, error)
	Groups(ctx context.Context, prefix string) ([]service.GroupInfo, error)
	GroupStats() fsm.GroupStats
	Assignments(ctx context.Context, group, member string, lease uint64, from uint64, resume bool) (service.AssignmentWatch, error)
}

var _ GroupsService = (*service.Service)(nil)

// groupsAPI implements leaseholdv1connect.GroupsHandler: checks, converts,
// calls the service.
type groupsAPI struct {
	s   *Server
	svc GroupsService
}

func newGroupsAPI(s *Server, reg prometheus.Registerer) groupsAPI {
	svc, _ := s.svc.(GroupsService)
	h := groupsAPI{s: s, svc: svc}
	if svc != nil {
		registerGroupMetrics(reg, svc)
	}
	return h
}

func (h groupsAPI) ready() error {
	if h.svc == nil {
		return leasehold.Errorf(leasehold.CodeUnknown, "this node's service has no partition groups")
	}
	return nil
}

func groupName(name string) error {
	return leasehold.ValidateName("group", name, service.MaxGroupNameLen, true)
}

// groupWrite checks what every write to a named group starts with: a
// node that has groups, the group's name and the request_id.
func (h groupsAPI) groupWrite(group, requestID string) error {
	if err := h.ready(); err != nil {
		return err
	}
	if err := groupName(group); err != nil {
		return err
	}
	// The state machine needs no request_id of a group write: Create, Grow
	// and AckRevocation are retried safely by their values, and a Join by
	// its secret (a retry with the secret of a live session of the member
	// answers that session). It is checked all the same.
	return optionalRequestID(requestID)
}

func partitionCount(n uint32) error {
	if n < 1 || n > service.MaxGroupPartitions {
		return leasehold.Errorf(leasehold.CodeInvalid, "partitions is %d; it must be between 1 and %d", n, service.MaxGroupPartitions)
	}
	return nil
}

func (h groupsAPI) Create(ctx context.Context, req *connect.Request[pb.GroupsCreateRequest]) (*connect.Response[pb.GroupsCreateResponse], error) {
	m := req.Msg
	if err := h.groupWrite(m.Group, m.RequestId); err != nil {
		return nil, err
	}
	if err := partitionCount(m.Partitions); err != nil {
		return nil, err
	}
	timeout, err := duration("revoke_timeout", m.RevokeTimeout, 0)
	if err != nil {
		return nil, err
	}
	if timeout != 0 {
		if err := leasehold.ValidateDuration("revoke_timeout", timeout, leasehold.MinTTL, leasehold.MaxTTL); err != nil {
			return nil, err
		}
	}
	res, err := h.svc.GroupCommand(ctx, &service.GroupCreate{Group: m.Group, Partitions: m.Partitions, RevokeTimeout: timeout, Caller: caller(ctx)})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.GroupsCreateResponse{Group: groupPB(res.Group())}), nil
}

func (h groupsAPI) Grow(ctx context.Context, req *connect.Request[pb.GroupsGrowRequest]) (*connect.Response[pb.GroupsGrowResponse], error) {
	m := req.Msg
	if err := h.groupWrite(m.Group, m.RequestId); err != nil {
		return nil, err
	}
	if err := partitionCount(m.Partitions); err != nil {
		return nil, err
	}
	res, err := h.svc.GroupCommand(ctx, &service.GroupGrow{Group: m.Group, Partitions: m.Partitions, Caller: caller(ctx)})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.GroupsGrowResponse{Group: groupPB(res.Group())}), nil
}

func (h groupsAPI) Delete(ctx context.Context, req *connect.Request[pb.GroupsDeleteRequest]) (*connect.Response[pb.GroupsDeleteResponse], error) {
	m := req.Msg
	if err := h.groupWrite(m.Group, m.RequestId); err != nil {
		return nil, err
	}
	if err := leasehold.ValidateName("reason", m.Reason, service.MaxReasonLen, true); err != nil {
		return nil, err
	}
	if _, err := h.svc.GroupCommand(ctx, &service.GroupDelete{Group: m.Group, Actor: Identity(ctx), Reason: m.Reason}); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.GroupsDeleteResponse{}), nil
}

func (h groupsAPI) List(ctx context.Context, req *connect.Request[pb.GroupsListRequest]) (*connect.Response[pb.GroupsListResponse], error) {
	if err := h.ready(); err != nil {
		return nil, err
	}
	if err := leasehold.ValidateName("prefix", req.Msg.Prefix, service.MaxGroupNameLen, false); err != nil {
		return nil, err
	}
	gs, err := h.svc.Groups(ctx, req.Msg.Prefix)
	if err != nil {
		return nil, err
	}
	out := &pb.GroupsListResponse{}
	for i := range gs {
		out.Groups = append(out.Groups, groupPB(&gs[i]))
	}
	return connect.NewResponse(out), nil
}

func (h groupsAPI) Get(ctx context.Context, req *connect.Request[pb.GroupsGetRequest]) (*connect.Response[pb.GroupsGetResponse], error) {
	name := req.Msg.Group
	if err := h.ready(); err != nil {
		return nil, err
	}
	if err := groupName(name); err != nil {
		return nil, err
	}
	d, expiresIn, found, err := h.svc.Group(ctx, name)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, leasehold.Errorf(leasehold.CodeNotFound, "group %q does not exist", name)
	}
	out := &pb.GroupsGetResponse{Group: groupPB(&d.GroupInfo)}
	for _, m := range d.Members {
		gm := &pb.GroupMember{Member: m.Member, LeaseId: m.LeaseID, Since: timePB(m.Since), Metadata: m.Metadata,
			Partitions: m.Partitions, Revoking: m.Revoking}
		if e := expiresIn[m.LeaseID]; e >= 0 {
			gm.ExpiresIn = durPB(e)
		}
		out.Members = append(out.Members, gm)
	}
	for _, p := range d.Partitions {
		gp := &pb.GroupPartition{Partition: p.Partition, Owner: p.Owner, LeaseId: p.LeaseID, Epoch: p.Epoch,
			Revoking: p.Revoking, NextOwner: p.NextOwner}
		if p.Owner != "" {
			gp.Since = timePB(p.Since)
		}
		if p.Revoking {
			gp.RevokingSince = timePB(p.RevokingSince)
		}
		out.Partitions = append(out.Partitions, gp)
	}
	return connect.NewResponse(out), nil
}

func (h groupsAPI) Join(ctx context.Context, req *connect.Request[pb.GroupsJoinRequest]) (*connect.Response[pb.GroupsJoinResponse], error) {
	m := req.Msg
	if err := h.ready(); err != nil {
		return nil, err
	}
	cmd, secret, err := joinCommand(m, caller(ctx))
	if err != nil {
		return nil, err
	}
	m.Secret = secret // a forwarded copy carries it
	res, err := h.svc.GroupCommand(ctx, cmd)
	if err != nil {
		return nil, err
	}
	out := &pb.GroupsJoinResponse{Lease: leasePB(res.Lease, res.Remaining), Secret: secret,
		ExpiresIn: durPB(res.Remaining), Group: groupPB(res.Group())}
	for _, a := range res.Group().Assignments {
		out.Partitions = append(out.Partitions, assignmentPB(a, assignmentState(a), 0))
	}
	return connect.NewResponse(out), nil
}

// joinCommand checks a JoinRequest; the secret is the caller's or, when
// it sent none, a new one.
func joinCommand(m *pb.GroupsJoinRequest, caller string) (*service.GroupJoin, string, error) {
	if err := groupName(m.Group); err != nil {
		return nil, "", err
	}
	if err := leasehold.ValidateName("member", m.Member, service.MaxGroupMemberLen, true); err != nil {
		return nil, "", err
	}
	ttl, err := duration("ttl", m.Ttl, leasehold.DefaultTTL)
	if err != nil {
		return nil, "", err
	}
	if err := leasehold.ValidateDuration("ttl", ttl, leasehold.MinTTL, leasehold.MaxTTL); err != nil {
		return nil, "", err
	}
	if err := leasehold.ValidateMetadata(m.Metadata); err != nil {
		return nil, "", err
	}
	if err := optionalRequestID(m.RequestId); err != nil {
		return nil, "", err
	}
	if m.RequestId != "" && m.Secret == "" {
		// As an Acquire's: a retry is recognised by the secret, and a
		// node-made one differs on every try.
		return nil, "", leasehold.Errorf(leasehold.CodeInvalid,
			"a join with a request_id needs a secret: a retry is recognised by its secret, and only the secret can renew or leave the session; "+
				"send a secret (%d hex characters) you keep, or neither (the node then makes one)", 2*leasehold.SecretBytes)
	}
	secret, hash, err := secretHash(m.Secret)
	if err != nil {
		return nil, "", err
	}
	return &service.GroupJoin{Group: m.Group, Member: m.Member, TTL: ttl, Metadata: m.Metadata, SecretHash: hash, Caller: caller}, secret, nil
}

func (h groupsAPI) Leave(ctx context.Context, req *connect.Request[pb.GroupsLeaveRequest]) (*connect.Response[pb.GroupsLeaveResponse], error) {
	m := req.Msg
	if err := h.ready(); err != nil {
		return nil, err
	}
	hash, err := leaseRef(m.LeaseId, m.Secret)
	if err != nil {
		return nil, err
	}
	if m.RequestId, err = requestID(m.RequestId); err != nil {
		return nil, err
	}
	if _, err := h.svc.GroupCommand(ctx, &service.GroupLeave{RequestID: m.RequestId, LeaseID: m.LeaseId, SecretHash: hash, Caller: caller(ctx)}); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.GroupsLeaveResponse{}), nil
}

func (h groupsAPI) AckRevocation(ctx context.Context, req *connect.Request[pb.GroupsAckRevocationRequest]) (*connect.Response[pb.GroupsAckRevocationResponse], error) {
	m := req.Msg
	if err := h.groupWrite(m.Group, m.RequestId); err != nil {
		return nil, err
	}
	if err := leasehold.ValidateName("member", m.Member, service.MaxGroupMemberLen, true); err != nil {
		return nil, err
	}
	hash, err := leaseRef(m.LeaseId, m.Secret)
	if err != nil {
		return nil, err
	}
	if m.Epoch == 0 {
		return nil, leasehold.Errorf(leasehold.CodeInvalid, "epoch must be set (the epoch of the grant being given up)")
	}
	if _, err := h.svc.GroupCommand(ctx, &service.GroupRevoked{Group: m.Group, Member: m.Member, LeaseID: m.LeaseId,
		SecretHash: hash, Partition: m.Partition, Epoch: m.Epoch}); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.GroupsAckRevocationResponse{}), nil
}

func (h groupsAPI) Assignments(ctx context.Context, req *connect.Request[pb.GroupsAssignmentsRequest], stream *connect.ServerStream[pb.GroupsAssignmentsResponse]) error {
	s, m := h.s, req.Msg
	if err := h.ready(); err != nil {
		return api.ToConnect(err)
	}
	if err := groupName(m.Group); err != nil {
		return api.ToConnect(err)
	}
	if err := leasehold.ValidateName("member", m.Member, service.MaxGroupMemberLen, true); err != nil {
		return api.ToConnect(err)
	}
	if m.LeaseId == 0 {
		return api.ToConnect(leasehold.Errorf(leasehold.CodeInvalid, "lease_id must be set (the session lease returned by Join)"))
	}
	// As a watch, the stream ends as soon as the server starts shutting
	// down, and tells its caller where to resume.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.watching, cancel)
	defer stop()
	w, err := h.svc.Assignments(ctx, m.Group, m.Member, m.LeaseId, m.GetFromIndex(), m.FromIndex != nil)
	if err != nil {
		return api.ToConnect(err)
	}
	defer w.Close()
	last := w.Index
	if m.FromIndex == nil || w.Ended {
		first := &pb.GroupsAssignmentsResponse{Index: last, Initial: m.FromIndex == nil, GroupPartitions: w.Partitions, Ended: w.Ended}
		for _, a := range w.Current {
			first.Changes = append(first.Changes, assignmentPB(a, assignmentState(a), w.RevokeWithin))
		}
		if err := stream.Send(first); err != nil || w.Ended {
			return err
		}
	}
	for b := range w.Batches() {
		out := &pb.GroupsAssignmentsResponse{Index: b.Index}
		for i := range b.Events {
			e := &b.Events[i]
			if a, kind, ok := service.AssignmentChange(e, m.LeaseId); ok {
				out.Changes = append(out.Changes, assignmentPB(a, eventState(kind), w.RevokeWithin))
			} else if service.SessionEnded(e, m.LeaseId) {
				out.Ended = true
			} else if n, ok := service.GroupGrown(e, m.Group); ok {
				out.GroupPartitions = n
			}
		}
		if err := stream.Send(out); err != nil { // changes, or progress: resume from here
			return err
		}
		if out.Ended {
			return nil
		}
		last = b.Index
	}
	if s.watching.Err() != nil {
		return api.ToConnect(leasehold.Errorf(leasehold.CodeUnavailable,
			"this node is shutting down: resume the assignments from index %d on another node", last))
	}
	if err := w.Err(); leasehold.CodeOf(err) != leasehold.CodeUnknown {
		return api.ToConnect(err)
	}
	return ctx.Err()
}

func assignmentState(a service.Assignment) pb.AssignmentState {
	if a.Revoking {
		return pb.AssignmentState_ASSIGNMENT_STATE_REVOKING
	}
	return pb.AssignmentState_ASSIGNMENT_STATE_ADDED
}

func eventState(k fsm.EventKind) pb.AssignmentState {
	switch k {
	case fsm.EventGroupAssigned:
		return pb.AssignmentState_ASSIGNMENT_STATE_ADDED
	case fsm.EventGroupRevoking:
		return pb.AssignmentState_ASSIGNMENT_STATE_REVOKING
	case fsm.EventGroupRemoved:
		return pb.AssignmentState_ASSIGNMENT_STATE_REMOVED
	}
	return pb.AssignmentState_ASSIGNMENT_STATE_UNSPECIFIED
}

func assignmentPB(a service.Assignment, st pb.AssignmentState, revokeWithin time.Duration) *pb.Assignment {
	out := &pb.Assignment{Partition: a.Partition, Epoch: a.Epoch, State: st}
	if st == pb.AssignmentState_ASSIGNMENT_STATE_REVOKING && revokeWithin > 0 {
		out.RevokeWithin = durPB(revokeWithin)
	}
	return out
}

func groupPB(g *service.GroupInfo) *pb.Group {
	if g == nil {
		return nil
	}
	out := &pb.Group{Name: g.Name, Partitions: g.Partitions, Members: uint32(g.Members), Rebalances: g.Rebalances,
		PendingRevocations: uint32(g.PendingRevocations), Unowned: uint32(g.Unowned), CreatedAt: timePB(g.CreatedAt)}
	if g.RevokeTimeout > 0 {
		out.RevokeTimeout = durPB(g.RevokeTimeout)
	}
	return out
}
