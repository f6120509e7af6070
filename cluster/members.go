package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"github.com/leasehold/leasehold/api/leasehold"
)

// NotLeaderError says this node cannot serve a request because it does not
// lead; Leader names the leader if one is known, so the request can be
// forwarded there.
type NotLeaderError struct {
	LeaderID   string
	LeaderAddr string
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID == "" {
		return "no leader is elected yet; retry shortly"
	}
	return fmt.Sprintf("this node is not the leader; the leader is %s at %s", e.LeaderID, e.LeaderAddr)
}

// Unwrap makes the error match leasehold.ErrUnavailable.
func (e *NotLeaderError) Unwrap() error {
	return &leasehold.Error{Code: leasehold.CodeUnavailable, Message: e.Error()}
}

// DialForward opens a connection to another node's forwarding listener;
// addr is its raft address (the leader's comes in NotLeaderError).
func (n *Node) DialForward(ctx context.Context, addr string) (net.Conn, error) {
	return n.mux.dialKind(ctx, addr, connForward)
}

// ForwardListener yields the connections other nodes open to forward API
// requests here. Serve the API on it.
func (n *Node) ForwardListener() net.Listener {
	return newSubListener(n.mux, n.mux.forward)
}

// Member is one server in the raft configuration.
type Member struct {
	ID       string
	Addr     string
	Voter    bool
	IsLeader bool
}

// Members lists the current configuration.
func (n *Node) Members() ([]Member, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, leasehold.Errorf(leasehold.CodeUnavailable, "read configuration: %v", err)
	}
	_, leader := n.raft.LeaderWithID()
	var out []Member
	for _, s := range f.Configuration().Servers {
		out = append(out, Member{ID: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter, IsLeader: s.ID == leader})
	}
	return out, nil
}

// membershipTimeout bounds a configuration change.
const membershipTimeout = 30 * time.Second

// AddVoter adds (or re-adds) a voter. Only the leader can.
func (n *Node) AddVoter(id, addr string) error {
	if err := leasehold.ValidateName("node id", id, 64, true); err != nil {
		return err
	}
	if _, err := net.ResolveTCPAddr("tcp", addr); err != nil {
		return leasehold.Errorf(leasehold.CodeInvalid, "raft address %q is not host:port", addr)
	}
	return n.membershipError(n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, membershipTimeout).Error())
}

// RemoveServer removes a server from the configuration. Only the leader
// can; removing the leader makes it step down.
func (n *Node) RemoveServer(id string) error {
	if err := leasehold.ValidateName("node id", id, 64, true); err != nil {
		return err
	}
	members, err := n.Members()
	if err != nil {
		return err
	}
	found := false
	for _, m := range members {
		found = found || m.ID == id
	}
	if !found {
		return leasehold.Errorf(leasehold.CodeNotFound, "node %q is not a member", id)
	}
	return n.membershipError(n.raft.RemoveServer(raft.ServerID(id), 0, membershipTimeout).Error())
}

// TransferLeadership hands leadership to id, or to the most up-to-date
// follower if id is empty. A leader named id answers that it is done:
// a retry whose first attempt moved the leadership there lands on it (raft
// would refuse a transfer to itself, an error the client retries).
func (n *Node) TransferLeadership(id string) error {
	if id == n.cfg.NodeID && n.IsLeader() {
		return nil
	}
	var f raft.Future
	if id == "" {
		f = n.raft.LeadershipTransfer()
	} else {
		members, err := n.Members()
		if err != nil {
			return err
		}
		for _, m := range members {
			if m.ID == id {
				f = n.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(m.Addr))
			}
		}
		if f == nil {
			return leasehold.Errorf(leasehold.CodeNotFound, "node %q is not a member", id)
		}
	}
	return n.membershipError(f.Error())
}

func (n *Node) membershipError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader):
		return n.notLeader()
	}
	var le *leasehold.Error
	if errors.As(err, &le) {
		return err
	}
	return leasehold.Errorf(leasehold.CodeUnavailable, "membership change failed: %v", err)
}

// LocalStatus is this node's view of raft.
type LocalStatus struct {
	ID           string
	State        string
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64
	LastIndex    uint64
	LeaderID     string
	LeaderAddr   string
	LastContact  time.Duration // since the leader was last heard from (followers)
}

func (n *Node) LocalStatus() LocalStatus {
	st := n.raft.Stats()
	s := LocalStatus{
		ID:           n.cfg.NodeID,
		State:        n.raft.State().String(),
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: n.raft.AppliedIndex(),
		LastIndex:    n.raft.LastIndex(),
	}
	fmt.Sscan(st["term"], &s.Term)
	s.LeaderAddr, s.LeaderID = func() (string, string) { a, i := n.raft.LeaderWithID(); return string(a), string(i) }()
	if lc := n.raft.LastContact(); !lc.IsZero() {
		s.LastContact = time.Since(lc)
	}
	return s
}

// Ready reports whether this node can serve: it leads and a quorum just
// confirmed it, or it follows a leader heard from recently.
func (n *Node) Ready(ctx context.Context) error {
	if err := n.fault.get(); err != nil {
		return fmt.Errorf("stopped after a failed write to the raft log: %w", err)
	}
	if err := n.m.failed(); err != nil {
		return err
	}
	if n.raft.State() == raft.Leader {
		if !n.timers.isActive() {
			return errors.New("taking over as leader")
		}
		errc := make(chan error, 1)
		go func() { errc <- n.raft.VerifyLeader().Error() }()
		select {
		case err := <-errc:
			if err != nil {
				return fmt.Errorf("leader without a quorum: %v", err)
			}
			return nil
		case <-ctx.Done():
			return errors.New("leader without a quorum: no answer in time")
		}
	}
	_, id := n.raft.LeaderWithID()
	if id == "" {
		return errors.New("no leader")
	}
	if lc := n.raft.LastContact(); lc.IsZero() || time.Since(lc) > 4*n.cfg.HeartbeatTimeout {
		return fmt.Errorf("leader %s not heard from recently", id)
	}
	return nil
}
