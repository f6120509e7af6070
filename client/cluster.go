package client

import (
	"context"

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

// RemoveServer removes a node from the configuration.
func (c *Client) RemoveServer(ctx context.Context, id string) error {
	_, err := call(ctx, c, 0, clusterOf, leaseholdv1connect.ClusterClient.RemoveServer, &pb.RemoveServerRequest{Id: id})
	return err
}

// TransferLeader hands leadership to id (or any up-to-date follower if "").
func (c *Client) TransferLeader(ctx context.Context, id string) error {
	_, err := call(ctx, c, 0, clusterOf, leaseholdv1connect.ClusterClient.TransferLeader, &pb.TransferLeaderRequest{Id: id})
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
