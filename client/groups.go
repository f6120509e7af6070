package client

import (
	"context"
	"math"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// GroupInfo is a partition group as anyone may see it.
type GroupInfo struct {
	Name       string
	Partitions int
	// RevokeTimeout is how long a member may take to acknowledge a
	// revocation before its session is ended; 0: the member's TTL.
	RevokeTimeout      time.Duration
	Members            int
	Rebalances         uint64 // assignment changes since creation
	PendingRevocations int
	Unowned            int // partitions with no owner now
	CreatedAt          time.Time
}

// GroupMemberInfo is one member of a group (Group).
type GroupMemberInfo struct {
	Member     string
	LeaseID    uint64
	Since      time.Time
	Metadata   map[string]string
	Partitions []int // owned, revoking ones included
	Revoking   []int
	ExpiresIn  time.Duration // 0: unknown
}

// PartitionInfo is one partition of a group and its owner (Group).
type PartitionInfo struct {
	Partition int
	Owner     string // empty: no owner now
	LeaseID   uint64
	Epoch     uint64
	Since     time.Time
	// Revoking: the owner must give it up; NextOwner gets it after.
	Revoking      bool
	NextOwner     string
	RevokingSince time.Time
}

// GroupDetail is what Group reports: the group, its members by name and
// every partition by number.
type GroupDetail struct {
	GroupInfo
	MemberList    []GroupMemberInfo
	PartitionList []PartitionInfo
}

// GroupOption adjusts CreateGroup.
type GroupOption func(*groupOptions)

type groupOptions struct {
	revokeTimeout time.Duration
}

// RevokeTimeout bounds how long a member may take to acknowledge a
// revocation before its session is ended (default: the member's TTL).
func RevokeTimeout(d time.Duration) GroupOption {
	return func(o *groupOptions) { o.revokeTimeout = d }
}

func groupsOf(e *endpoint) leaseholdv1connect.GroupsClient { return e.groups }

func groupInfo(g *pb.Group) GroupInfo {
	return GroupInfo{Name: g.GetName(), Partitions: int(g.GetPartitions()), RevokeTimeout: dur(g.GetRevokeTimeout()),
		Members: int(g.GetMembers()), Rebalances: g.GetRebalances(), PendingRevocations: int(g.GetPendingRevocations()),
		Unowned: int(g.GetUnowned()), CreatedAt: stamp(g.GetCreatedAt())}
}

// count is n on the wire, clamped so that an out-of-range n stays out of
// range there and the server refuses it with its own message.
func count(n int) uint32 { return uint32(min(max(0, n), math.MaxUint32)) }

func ints(ps []uint32) []int {
	return convertAll(ps, func(p uint32) int { return int(p) })
}

func groupMemberInfo(m *pb.GroupMember) GroupMemberInfo {
	return GroupMemberInfo{Member: m.GetMember(), LeaseID: m.GetLeaseId(), Since: stamp(m.GetSince()), Metadata: m.GetMetadata(),
		Partitions: ints(m.GetPartitions()), Revoking: ints(m.GetRevoking()), ExpiresIn: dur(m.GetExpiresIn())}
}

func partitionInfo(p *pb.GroupPartition) PartitionInfo {
	return PartitionInfo{Partition: int(p.GetPartition()), Owner: p.GetOwner(), LeaseID: p.GetLeaseId(), Epoch: p.GetEpoch(),
		Since: stamp(p.GetSince()), Revoking: p.GetRevoking(), NextOwner: p.GetNextOwner(), RevokingSince: stamp(p.GetRevokingSince())}
}

// CreateGroup makes the group name with partitions partitions (numbered
// from 0). It fails with leasehold.ErrHeld (AlreadyExists) if the group
// exists.
func (c *Client) CreateGroup(ctx context.Context, name string, partitions int, opts ...GroupOption) (GroupInfo, error) {
	req := &pb.GroupsCreateRequest{Group: name, Partitions: count(partitions), RequestId: randomHex(16)}
	var o groupOptions
	for _, f := range opts {
		f(&o)
	}
	if o.revokeTimeout != 0 {
		req.RevokeTimeout = durationpb.New(o.revokeTimeout)
	}
	resp, err := call(ctx, c, c.cfg.RequestTimeout, groupsOf, leaseholdv1connect.GroupsClient.Create, req)
	if err != nil {
		return GroupInfo{}, err
	}
	return groupInfo(resp.Group), nil
}

// GrowGroup raises the group's partition count to partitions; a lower
// count is refused (FailedPrecondition: groups never shrink).
func (c *Client) GrowGroup(ctx context.Context, name string, partitions int) (GroupInfo, error) {
	resp, err := call(ctx, c, c.cfg.RequestTimeout, groupsOf, leaseholdv1connect.GroupsClient.Grow,
		&pb.GroupsGrowRequest{Group: name, Partitions: count(partitions), RequestId: randomHex(16)})
	if err != nil {
		return GroupInfo{}, err
	}
	return groupInfo(resp.Group), nil
}

// DeleteGroup removes the group and ends every member's session (admin;
// reason goes to the audit log).
func (c *Client) DeleteGroup(ctx context.Context, name, reason string) error {
	_, err := call(ctx, c, c.cfg.RequestTimeout, groupsOf, leaseholdv1connect.GroupsClient.Delete,
		&pb.GroupsDeleteRequest{Group: name, Reason: reason, RequestId: randomHex(16)})
	return err
}

// Groups lists the groups whose name starts with prefix, by name.
func (c *Client) Groups(ctx context.Context, prefix string) ([]GroupInfo, error) {
	resp, err := call(ctx, c, c.cfg.RequestTimeout, groupsOf, leaseholdv1connect.GroupsClient.List,
		&pb.GroupsListRequest{Prefix: prefix})
	if err != nil {
		return nil, err
	}
	return convertAll(resp.Groups, groupInfo), nil
}

// Group shows one group: its members and every partition with owner and
// epoch. It fails with leasehold.ErrNotFound if there is no such group.
func (c *Client) Group(ctx context.Context, name string) (GroupDetail, error) {
	resp, err := call(ctx, c, c.cfg.RequestTimeout, groupsOf, leaseholdv1connect.GroupsClient.Get,
		&pb.GroupsGetRequest{Group: name})
	if err != nil {
		return GroupDetail{}, err
	}
	return GroupDetail{GroupInfo: groupInfo(resp.Group), MemberList: convertAll(resp.Members, groupMemberInfo),
		PartitionList: convertAll(resp.Partitions, partitionInfo)}, nil
}
