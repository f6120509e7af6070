package service

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fsm"
)

// Partition groups on a node (see fsm/groups.go): each request is built
// into its command here; a member's session is a lease, renewed with
// Renew. Assignments is a watch of the group's events, picked for one
// session.

// GroupCreateRequest makes a group of Partitions partitions, or finds it
// as it is if one of that name exists with the same settings (so a retry
// is safe). RevokeTimeout bounds a revocation's acknowledgement (0: the
// member's session TTL).
type GroupCreateRequest struct {
	Group         string
	Partitions    uint32
	RevokeTimeout time.Duration
}

// GroupGrowRequest raises a group's partition count; the same count is a
// no-op.
type GroupGrowRequest struct {
	Group      string
	Partitions uint32
}

// GroupDeleteRequest removes a group and ends every member's session, on
// the caller's word and Reason (audited).
type GroupDeleteRequest struct {
	Group  string
	Reason string
}

// GroupJoinRequest starts Member's session (a lease of TTL whose secret's
// hash is SecretHash) in Group. A retry carrying the live session's
// secret is answered with that session.
type GroupJoinRequest struct {
	Group      string
	Member     string
	TTL        time.Duration
	Metadata   map[string]string
	SecretHash [32]byte
}

// Joined is a Join's answer: the session's lease, how long it runs, and
// the group with the member's partitions (Group.Assignments).
type Joined struct {
	Lease     *leasehold.Lease
	Remaining time.Duration
	Group     *leasehold.GroupInfo
}

// GroupLeaveRequest ends a member's session, proven by its secret's hash.
type GroupLeaveRequest struct {
	LeaseID    uint64
	SecretHash [32]byte
	RequestID  string
}

// GroupAckRevocationRequest acknowledges that the member stopped working
// on Partition, whose grant of Epoch was being revoked from its session
// LeaseID.
type GroupAckRevocationRequest struct {
	Group      string
	Member     string
	LeaseID    uint64
	SecretHash [32]byte
	Partition  uint32
	Epoch      uint64
}

// group proposes one group command; the state machine's refusal is the
// error.
func (s *Service) group(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	res, err := s.node.Propose(ctx, cmd)
	if err == nil {
		err = res.Err
	}
	return res, err
}

// GroupCreate makes a group.
func (s *Service) GroupCreate(ctx context.Context, req *GroupCreateRequest) (*leasehold.GroupInfo, error) {
	res, err := s.group(ctx, &fsm.GroupCreate{Group: req.Group, Partitions: req.Partitions, RevokeTimeout: req.RevokeTimeout,
		Caller: CallerOf(ctx).Name})
	return res.Group(), err
}

// GroupGrow raises a group's partition count.
func (s *Service) GroupGrow(ctx context.Context, req *GroupGrowRequest) (*leasehold.GroupInfo, error) {
	res, err := s.group(ctx, &fsm.GroupGrow{Group: req.Group, Partitions: req.Partitions, Caller: CallerOf(ctx).Name})
	return res.Group(), err
}

// GroupDelete removes a group.
func (s *Service) GroupDelete(ctx context.Context, req *GroupDeleteRequest) error {
	_, err := s.group(ctx, &fsm.GroupDelete{Group: req.Group, Actor: CallerOf(ctx).Actor, Reason: req.Reason})
	return err
}

// GroupJoin starts a member's session.
func (s *Service) GroupJoin(ctx context.Context, req *GroupJoinRequest) (Joined, error) {
	res, err := s.group(ctx, &fsm.GroupJoin{Group: req.Group, Member: req.Member, TTL: req.TTL, Metadata: req.Metadata,
		SecretHash: req.SecretHash, Caller: CallerOf(ctx).Name})
	return Joined{Lease: res.Lease, Remaining: res.Remaining, Group: res.Group()}, err
}

// GroupLeave ends a member's session.
func (s *Service) GroupLeave(ctx context.Context, req *GroupLeaveRequest) error {
	_, err := s.group(ctx, &fsm.GroupLeave{RequestID: req.RequestID, LeaseID: req.LeaseID, SecretHash: req.SecretHash,
		Caller: CallerOf(ctx).Name})
	return err
}

// GroupAckRevocation acknowledges a revocation.
func (s *Service) GroupAckRevocation(ctx context.Context, req *GroupAckRevocationRequest) error {
	_, err := s.group(ctx, &fsm.GroupRevoked{Group: req.Group, Member: req.Member, LeaseID: req.LeaseID,
		SecretHash: req.SecretHash, Partition: req.Partition, Epoch: req.Epoch})
	return err
}

// Group reads the group named name, with what is left of each member's
// session (-1: unknown here) by lease id.
func (s *Service) Group(ctx context.Context, name string) (d leasehold.GroupDetail, expiresIn map[uint64]time.Duration, found bool, err error) {
	err = s.node.Read(ctx, func(st *fsm.State) { d, found = st.Group(name) })
	if found {
		expiresIn = make(map[uint64]time.Duration, len(d.Members))
		for _, m := range d.Members {
			expiresIn[m.LeaseID] = s.expiresIn(m.LeaseID)
		}
	}
	return d, expiresIn, found, err
}

// Groups reads every group whose name starts with prefix, by name.
func (s *Service) Groups(ctx context.Context, prefix string) (gs []leasehold.GroupInfo, err error) {
	err = s.node.Read(ctx, func(st *fsm.State) { gs = st.Groups(prefix) })
	return gs, err
}

// AssignmentWatch is a member's partitions as this node has applied them
// up to Index, and a watcher of the group's changes after it.
type AssignmentWatch struct {
	Current    []leasehold.Assignment // nil when resuming
	Partitions uint32                 // the group's partition count (0 when resuming)
	// Ended: the session is over already (resuming after its end).
	Ended bool
	// RevokeWithin is the session's bound to acknowledge a revocation.
	RevokeWithin time.Duration
	Index        uint64
	*Watcher
}

// catchUp bounds how long Assignments waits for this node to apply the
// Join of a session it does not know yet (a follower a little behind).
const catchUp = 3 * time.Second

// Assignments watches the partitions of member's session lease in group
// on this node's own history (any node serves it). Without resume it
// first reads the member's partitions; with resume it watches the changes
// after from. Pick the session's changes out of the batches with
// AssignmentChange and SessionEnded.
func (s *Service) Assignments(ctx context.Context, group, member string, lease uint64, from uint64, resume bool) (AssignmentWatch, error) {
	var a AssignmentWatch
	found := false
	deadline := time.Now().Add(catchUp)
	for {
		var last uint64
		issued := false // the session's lease id is a token this node has seen issued
		s.node.ReadLocal(func(st *fsm.State) {
			last, issued = st.LastIndex(), st.LastToken() >= lease
			a.Current, a.Partitions, found = st.GroupAssignments(group, member, lease)
			a.RevokeWithin = st.GroupRevokeTimeout(group, lease)
			a.Index = last
		})
		if found || (issued && (!resume || last >= from)) || time.Now().After(deadline) {
			break
		}
		select { // this node has not applied the Join yet
		case <-ctx.Done():
			return a, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	if !found && !resume {
		return a, leasehold.Errorf(leasehold.CodeNotFound,
			"member %q has no session with lease %d in group %q: it ended, or never began; join again", member, lease, group)
	}
	if resume {
		a.Current, a.Partitions, a.Ended, a.Index = nil, 0, !found, from
	}
	w, err := s.Watch(ctx, WatchRequest{Prefixes: []string{fsm.GroupResource(group)}, From: a.Index})
	a.Watcher = w
	return a, err
}

// AssignmentState is how an assignment change leaves a member's
// partition.
type AssignmentState uint8

const (
	AssignmentAdded    AssignmentState = iota + 1 // the member owns it now
	AssignmentRevoking                            // the member must give it up
	AssignmentRemoved                             // the member no longer owns it
)

// AssignmentChange says whether e changes the partitions of session
// lease, and how.
func AssignmentChange(e *Event, lease uint64) (a leasehold.Assignment, state AssignmentState, ok bool) {
	switch e.Kind {
	case kindGroupAssigned:
		state = AssignmentAdded
	case kindGroupRevoking:
		state = AssignmentRevoking
	case kindGroupRemoved:
		state = AssignmentRemoved
	default:
		return leasehold.Assignment{}, 0, false
	}
	if e.LeaseID != lease {
		return leasehold.Assignment{}, 0, false
	}
	return leasehold.Assignment{Partition: e.Partition, Epoch: e.Token, Revoking: state == AssignmentRevoking}, state, true
}

// SessionEnded says whether e ends session lease.
func SessionEnded(e *Event, lease uint64) bool {
	switch e.Kind {
	case kindReleased, kindExpired, kindForceReleased:
		return e.LeaseID == lease
	}
	return false
}

// GroupGrown says whether e changes group's partition count, to n.
func GroupGrown(e *Event, group string) (n uint32, ok bool) {
	return e.Partition, e.Kind == kindGroupChanged && e.Group == group && e.Partition != 0
}
