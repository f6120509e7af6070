package client

import (
	"context"
	"errors"
	"slices"

	"github.com/leasehold/leasehold/api/leasehold"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// Membership and status calls. Any node answers; changes are forwarded to
// the leader. They are not bounded per attempt: a change can take a while.

// Members lists the servers in the raft configuration.
func (c *Client) Members(ctx context.Context) ([]Member, error) {
	r, err := call(ctx, c, 0, clusterOf, leaseholdv1connect.ClusterClient.Members, &pb.MembersRequest{})
	if err != nil {
		return nil, err
	}
	return convertAll(r.Members, member), nil
}

// AddVoter adds a node as a voter.
func (c *Client) AddVoter(ctx context.Context, id, raftAddr string) error {
	_, err := call(ctx, c, 0, clusterOf, leaseholdv1connect.ClusterClient.AddVoter, &pb.AddVoterRequest{Id: id, RaftAddr: raftAddr})
	return err
}

// RemoveServer removes a node from the configuration; one that is not a
// member is an error matching leasehold.ErrNotFound. Membership changes
// carry no request ID (they are raft's, not the state machine's), so a
// retry after a lost reply (removing the leader loses it often) finds the
// node gone: the client reads the members first, and a member that a
// retry finds gone was removed.
func (c *Client) RemoveServer(ctx context.Context, id string) error {
	ms, err := c.Members(ctx)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(ms, func(m Member) bool { return m.ID == id }) {
		return leasehold.Errorf(leasehold.CodeNotFound, "node %q is not a member", id)
	}
	_, err = call(ctx, c, 0, clusterOf, leaseholdv1connect.ClusterClient.RemoveServer, &pb.RemoveServerRequest{Id: id})
	if errors.Is(err, leasehold.ErrNotFound) {
		return nil // gone since the read: this call's first attempt, or another's
	}
	return err
}

// TransferLeader hands leadership to id (or any up-to-date follower if "").
// Without an id it names the leader it moves away from (read first), so a
// retry after a lost reply, or a call after an election moved leadership
// already, finds another node leading and does not move it again.
func (c *Client) TransferLeader(ctx context.Context, id string) error {
	req := &pb.TransferLeaderRequest{Id: id}
	if id == "" {
		ms, err := c.Members(ctx)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.Leader {
				req.From = m.ID
			}
		}
	}
	_, err := call(ctx, c, 0, clusterOf, leaseholdv1connect.ClusterClient.TransferLeader, req)
	return err
}

// ClusterStatus reports every member's role, term, commit and applied
// index, one entry per member (an unreachable one says why in Error).
func (c *Client) ClusterStatus(ctx context.Context) ([]NodeStatus, error) {
	r, err := call(ctx, c, 0, clusterOf, leaseholdv1connect.ClusterClient.Status, &pb.StatusRequest{})
	if err != nil {
		return nil, err
	}
	return convertAll(r.Nodes, nodeStatus), nil
}
