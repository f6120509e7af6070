package leasehold

import "time"

// The vocabulary of partition groups: their limits, a group, its members
// and partitions, and a member's assignment. A member's session is a
// lease (GroupSessionResource, reserved.go), so it takes the lease limits
// too.

// Limits of groups.
const (
	MaxGroupPartitions = 65536
	MaxGroupMembers    = 4096 // members of one group
	MaxGroups          = 10000
	MaxGroupNameLen    = MaxResourceLen
	MaxGroupMemberLen  = MaxOwnerLen
)

// GroupInfo is what a group command answers and inspection shows.
type GroupInfo struct {
	Name               string
	Partitions         uint32
	RevokeTimeout      time.Duration
	CreatedAt          time.Time
	Members            int
	Rebalances         uint64
	Moved              uint64
	Lapsed             uint64
	PendingRevocations int
	Unowned            int
	// Assignments: a Join's member's partitions, right after it joined.
	Assignments []Assignment
}

// Assignment is one partition of a member.
type Assignment struct {
	Partition uint32
	Epoch     uint64
	Revoking  bool
}

// GroupMember is what anyone may see of a member.
type GroupMember struct {
	Member     string
	LeaseID    uint64
	Since      time.Time // the session's grant, leader's wall clock (display only)
	Metadata   map[string]string
	Partitions []uint32 // owned, revoking ones included
	Revoking   []uint32
}

// GroupPartition is one partition's owner.
type GroupPartition struct {
	Partition     uint32
	Owner         string // "": no owner
	LeaseID       uint64
	Epoch         uint64 // the last grant's epoch
	Since         time.Time
	Revoking      bool
	NextOwner     string
	RevokingSince time.Time
}

// GroupDetail is a group with its members (by name) and partitions (by
// number).
type GroupDetail struct {
	GroupInfo
	Members    []GroupMember
	Partitions []GroupPartition
}

// GroupStats are totals over every group, for metrics.
type GroupStats struct {
	Groups, Members, Partitions, Pending int
	Rebalances, Moved, Lapsed            uint64
}
