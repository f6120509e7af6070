package cliout

import "github.com/leasehold/leasehold/client"

// The partition groups' structures.

// Group is a group's summary: groups create, groups grow, and each of
// groups (list).
type Group struct {
	Group              string `json:"group"`
	Partitions         int    `json:"partitions"`
	Members            int    `json:"members"`
	PendingRevocations int    `json:"pending_revocations"`
	Unowned            int    `json:"unowned"`
	Rebalances         uint64 `json:"rebalances"`
	RevokeTimeout      string `json:"revoke_timeout,omitempty"` // left out: the member's TTL
	CreatedAt          string `json:"created_at,omitempty"`
}

// Groups is groups' (list) output.
type Groups struct {
	Groups []Group `json:"groups"`
}

// GroupMember is one member of a group: groups show.
type GroupMember struct {
	Member     string            `json:"member"`
	LeaseID    uint64            `json:"lease_id"`
	Since      string            `json:"since,omitempty"`
	ExpiresIn  string            `json:"expires_in,omitempty"`
	Partitions []int             `json:"partitions"`
	Revoking   []int             `json:"revoking"`
	Metadata   map[string]string `json:"metadata,omitempty"`
}

// GroupPartition is one partition: its owner's lease and epoch (the
// partition's fencing token), and the owner-to-be while it is revoked.
type GroupPartition struct {
	Partition     int    `json:"partition"`
	Owner         string `json:"owner,omitempty"`
	LeaseID       uint64 `json:"lease_id,omitempty"`
	Epoch         uint64 `json:"epoch,omitempty"`
	Since         string `json:"since,omitempty"`
	Revoking      bool   `json:"revoking"`
	NextOwner     string `json:"next_owner,omitempty"`
	RevokingSince string `json:"revoking_since,omitempty"`
}

// GroupDetail is groups show's output: the summary, every member and
// every partition.
type GroupDetail struct {
	Group
	MemberList    []GroupMember    `json:"member_list"`
	PartitionList []GroupPartition `json:"partition_list"`
}

// GroupDeleted is groups delete's output.
type GroupDeleted struct {
	Group   string `json:"group"`
	Deleted bool   `json:"deleted"`
}

// FromGroup is g as printed.
func FromGroup(g client.GroupInfo) Group {
	return Group{Group: g.Name, Partitions: g.Partitions, Members: g.Members, PendingRevocations: g.PendingRevocations,
		Unowned: g.Unowned, Rebalances: g.Rebalances, RevokeTimeout: DurSet(g.RevokeTimeout), CreatedAt: Time(g.CreatedAt)}
}

// FromGroups is groups' (list) output.
func FromGroups(gs []client.GroupInfo) Groups {
	out := Groups{Groups: []Group{}}
	for _, g := range gs {
		out.Groups = append(out.Groups, FromGroup(g))
	}
	return out
}

// FromGroupDetail is groups show's output.
func FromGroupDetail(d client.GroupDetail) GroupDetail {
	out := GroupDetail{Group: FromGroup(d.GroupInfo), MemberList: []GroupMember{}, PartitionList: []GroupPartition{}}
	for _, m := range d.MemberList {
		out.MemberList = append(out.MemberList, GroupMember{Member: m.Member, LeaseID: m.LeaseID, Since: Time(m.Since),
			ExpiresIn: DurSet(m.ExpiresIn), Partitions: nonNilInts(m.Partitions), Revoking: nonNilInts(m.Revoking), Metadata: m.Metadata})
	}
	for _, p := range d.PartitionList {
		out.PartitionList = append(out.PartitionList, GroupPartition{Partition: p.Partition, Owner: p.Owner, LeaseID: p.LeaseID,
			Epoch: p.Epoch, Since: Time(p.Since), Revoking: p.Revoking, NextOwner: p.NextOwner, RevokingSince: Time(p.RevokingSince)})
	}
	return out
}

// nonNilInts keeps an empty list a list ([]) in JSON, not null.
func nonNilInts(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}
