package service

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fsm"
)

// Partition groups on a node (see fsm/groups.go): the commands are
// proposed as they are; a member's session is a lease, renewed with Renew.
// Assignments is a watch of the group's events, picked for one session.
type (
	GroupCreate    = fsm.GroupCreate
	GroupGrow      = fsm.GroupGrow
	GroupDelete    = fsm.GroupDelete
	GroupJoin      = fsm.GroupJoin
	GroupLeave     = fsm.GroupLeave
	GroupRevoked   = fsm.GroupRevoked
	GroupInfo      = fsm.GroupInfo
	GroupDetail    = fsm.GroupDetail
	GroupMember    = fsm.GroupMember
	GroupPartition = fsm.GroupPartition
	Assignment     = fsm.Assignment
)

// Limits of groups, for the API edge.
const (
	MaxGroupPartitions = fsm.MaxGroupPartitions
	MaxGroupNameLen    = fsm.MaxGroupNameLen
	MaxGroupMemberLen  = fsm.MaxGroupMemberLen
)

// GroupCommand proposes one group command; the state machine's refusal is
// the error.
func (s *Service) GroupCommand(ctx context.Context, cmd Command) (Result, error) {
	res, err := s.node.Propose(ctx, cmd)
	if err == nil {
		err = res.Err
	}
	return res, err
}

// Group reads the group named name, with what is left of each member's
// session (-1: unknown here) by lease id.
func (s *Service) Group(ctx context.Context, name string) (d GroupDetail, expiresIn map[uint64]time.Duration, found bool, err error) {
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
func (s *Service) Groups(ctx context.Context, prefix string) (gs []GroupInfo, err error) {
	err = s.node.Read(ctx, func(st *fsm.State) { gs = st.Groups(prefix) })
	return gs, err
}

// GroupStats reads this node's totals over every group, for metrics.
func (s *Service) GroupStats() (st fsm.GroupStats) {
	s.node.ReadLocal(func(state *fsm.State) { st = state.GroupStats() })
	return st
}

// AssignmentWatch is a member's partitions as this node has applied them
// up to Index, and a watcher of the group's changes after it.
type AssignmentWatch struct {
	Current    []Assignment // nil when resuming
	Partitions uint32       // the group's partition count (0 when resuming)
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

// AssignmentChange says whether e changes the partitions of session
// lease, and how.
func AssignmentChange(e *fsm.Event, lease uint64) (a Assignment, state fsm.EventKind, ok bool) {
	switch e.Kind {
	case fsm.EventGroupAssigned, fsm.EventGroupRevoking, fsm.EventGroupRemoved:
		if e.LeaseID == lease {
			return Assignment{Partition: e.Partition, Epoch: e.Token, Revoking: e.Kind == fsm.EventGroupRevoking}, e.Kind, true
		}
	}
	return Assignment{}, 0, false
}

// SessionEnded says whether e ends session lease.
func SessionEnded(e *fsm.Event, lease uint64) bool {
	switch e.Kind {
	case fsm.EventReleased, fsm.EventExpired, fsm.EventForceReleased:
		return e.LeaseID == lease
	}
	return false
}

// GroupGrown says whether e changes group's partition count, to n.
func GroupGrown(e *fsm.Event, group string) (n uint32, ok bool) {
	return e.Partition, e.Kind == fsm.EventGroupChanged && e.Group == group && e.Partition != 0
}
