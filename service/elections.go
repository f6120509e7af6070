package service

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fsm"
)

// Elections: leadership is a lease on the election's name (see
// fsm/elections.go), so campaigning waits exactly as an acquire does,
// resigning is a release, and renewal is a lease's.

// CampaignRequest asks to lead the election named by its one resource
// with Value, as the acquire it is: it waits up to Wait (in arrival
// order) while another candidate leads.
type CampaignRequest struct {
	AcquireRequest
	Value []byte
}

// ProclaimRequest changes the value of the leader holding lease LeaseID,
// proven by its secret's hash.
type ProclaimRequest struct {
	LeaseID    uint64
	SecretHash [32]byte
	Value      []byte
	RequestID  string
}

// Campaign proposes req and, while another candidate leads, waits for
// leadership in arrival order, as Acquire waits for a grant (with the same
// withdrawal when the caller goes away).
func (s *Service) Campaign(ctx context.Context, req *CampaignRequest) (Grant, error) {
	cmd := &fsm.Campaign{Acquire: *req.command(ctx).Base(), Value: req.Value}
	return answer(s.take(ctx, &cmd.Acquire, cmd))
}

// Proclaim changes the leader's value.
func (s *Service) Proclaim(ctx context.Context, req *ProclaimRequest) (Grant, error) {
	return answer(s.node.Propose(ctx, &fsm.Proclaim{RequestID: req.RequestID, LeaseID: req.LeaseID,
		SecretHash: req.SecretHash, Value: req.Value, Caller: CallerOf(ctx).Name}))
}

// Resign ends a leadership: a release of its lease.
func (s *Service) Resign(ctx context.Context, req *ReleaseRequest) (Grant, error) {
	return s.Release(ctx, req)
}

// Leader reads the election named name; found is false if nobody leads or
// campaigns for it. expiresIn is what is left of the leader's lease (-1:
// unknown here).
func (s *Service) Leader(ctx context.Context, name string) (e leasehold.Election, expiresIn time.Duration, found bool, err error) {
	err = s.node.Read(ctx, func(st *fsm.State) {
		if e, found = st.Leader(name); found && e.LeaseID != 0 {
			expiresIn = s.expiresIn(e.LeaseID)
		}
	})
	return e, expiresIn, found, err
}

// Elections reads a page of up to limit elections with a leader or
// candidates whose name starts with prefix and sorts after after, by name,
// and whether more follow.
func (s *Service) Elections(ctx context.Context, prefix, after string, limit int) (es []leasehold.Election, more bool, err error) {
	err = s.node.Read(ctx, func(st *fsm.State) { es, more = st.ElectionsPage(prefix, after, limit) })
	return es, more, err
}

// Observation is an election as this node has applied it up to Index,
// and a watcher of what changes after it.
type Observation struct {
	Current *leasehold.Election // nil when resuming, or when nothing is known of it
	Index   uint64
	*Watcher
}

// Observe watches the election named name on this node's own history
// (any node serves it). Without resume it first reads the election as
// this node applied it and watches from that index; with resume it
// watches the changes after from. Pick the LeaderChanged events of name
// out of the batches with IsLeaderChange.
func (s *Service) Observe(ctx context.Context, name string, from uint64, resume bool) (Observation, error) {
	var o Observation
	if resume {
		o.Index = from
	} else {
		s.node.ReadLocal(func(st *fsm.State) {
			o.Index = st.LastIndex()
			if e, ok := st.Leader(name); ok {
				o.Current = &e
			}
		})
		if o.Current == nil {
			o.Current = &leasehold.Election{Name: name}
		}
	}
	w, err := s.Watch(ctx, WatchRequest{Prefixes: []string{name}, From: o.Index})
	o.Watcher = w
	return o, err
}

// IsLeaderChange says whether e changes the leader of the election name.
func IsLeaderChange(e *Event, name string) bool {
	return e.Kind == kindLeaderChanged && len(e.Resources) == 1 && e.Resources[0] == name
}
