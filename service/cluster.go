package service

import (
	"context"
	"sync"
	"time"

	"github.com/leasehold/leasehold/cluster"
)

// Member is a server of the raft configuration.
type Member struct {
	ID       string
	Addr     string // its raft address
	Voter    bool
	IsLeader bool
}

// NodeStatus is one node's raft status, as it reports it.
type NodeStatus struct {
	ID           string
	State        string // Leader, Follower, Candidate, ...
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64
	LastIndex    uint64
	LeaderID     string
	LeaderAddr   string
	LastContact  time.Duration // since the leader was last heard from (followers)
}

func statusOf(st cluster.LocalStatus) NodeStatus {
	return NodeStatus{ID: st.ID, State: st.State, Term: st.Term, CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex,
		LastIndex: st.LastIndex, LeaderID: st.LeaderID, LeaderAddr: st.LeaderAddr, LastContact: st.LastContact}
}

// MemberStatus is one member's status in the cluster view; Err says why a
// member could not be asked (its Status then holds only its ID).
type MemberStatus struct {
	Addr   string // the member's raft address
	Status NodeStatus
	Err    error
}

// StatusTimeout bounds asking one member for its status.
const StatusTimeout = 2 * time.Second

// Members lists the cluster's current configuration.
func (s *Service) Members(context.Context) ([]Member, error) {
	ms, err := s.node.Members()
	out := make([]Member, len(ms))
	for i, m := range ms {
		out[i] = Member{ID: m.ID, Addr: m.Addr, Voter: m.Voter, IsLeader: m.IsLeader}
	}
	return out, err
}

// AddVoter adds a voter (or makes a non-voter one); the leader does it.
func (s *Service) AddVoter(_ context.Context, id, raftAddr string) error {
	if err := s.node.AddVoter(id, raftAddr); err != nil {
		return err
	}
	s.log.Info("added voter", "id", id, "raft_addr", raftAddr)
	return nil
}

// RemoveServer removes a member from the configuration.
func (s *Service) RemoveServer(_ context.Context, id string) error {
	if err := s.node.RemoveServer(id); err != nil {
		return err
	}
	s.log.Info("removed server", "id", id)
	return nil
}

// TransferLeader hands leadership to the member id (any member if empty).
func (s *Service) TransferLeader(_ context.Context, id string) error {
	return s.node.TransferLeadership(id)
}

// LocalStatus is this node's own raft status.
func (s *Service) LocalStatus() NodeStatus {
	return statusOf(s.node.LocalStatus())
}

// AskStatus asks the member at a raft address for its own status; the API
// front supplies it, since it is a call over that member's API.
type AskStatus func(ctx context.Context, raftAddr string) (NodeStatus, error)

// Status is every member's status, in configuration order: this node's
// own, and the others' asked in parallel, each within StatusTimeout. A
// member that does not answer is listed with its error.
func (s *Service) Status(ctx context.Context, ask AskStatus) ([]MemberStatus, error) {
	self := s.LocalStatus()
	ms, err := s.Members(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]MemberStatus, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		if m.ID == self.ID {
			out[i] = MemberStatus{Addr: m.Addr, Status: self}
			continue
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, StatusTimeout)
			defer cancel()
			st, err := ask(cctx, m.Addr)
			if err != nil {
				st = NodeStatus{ID: m.ID}
			}
			out[i] = MemberStatus{Addr: m.Addr, Status: st, Err: err}
		})
	}
	wg.Wait()
	return out, nil
}
