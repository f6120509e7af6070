package fsm

import (
	"sort"
	"strings"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// Reads of partition groups (groups.go), for inspection, the assignment
// stream and the leader's timers.

// GroupMember is what anyone may see of a member, GroupPartition one
// partition's owner, and GroupDetail a group with its members (by name)
// and partitions (by number) (leasehold/groups.go).
type (
	GroupMember    = leasehold.GroupMember
	GroupPartition = leasehold.GroupPartition
	GroupDetail    = leasehold.GroupDetail
)

// Group reads the group named name.
func (s *State) Group(name string) (GroupDetail, bool) {
	g := s.groups.byName.at(name)
	if g == nil {
		return GroupDetail{}, false
	}
	d := GroupDetail{GroupInfo: *s.groups.info(name, g)}
	names := sortedKeys(g.members)
	at := make(map[uint64]int, len(names))
	for i, m := range names {
		id := g.members[m]
		at[id] = i
		gm := GroupMember{Member: m, LeaseID: id}
		if l := s.leases.byID.at(id); l != nil {
			gm.Since, gm.Metadata = nanosTime(l.acquiredAt), l.more().Metadata
		}
		d.Members = append(d.Members, gm)
	}
	d.Partitions = make([]GroupPartition, len(g.parts))
	for p := range g.parts {
		ps := &g.parts[p]
		gp := GroupPartition{Partition: uint32(p), LeaseID: ps.lease, Epoch: ps.epoch, Revoking: ps.revoking}
		if i, ok := at[ps.lease]; ok && ps.lease != 0 {
			gp.Owner, gp.Since = names[i], nanosTime(ps.since)
			d.Members[i].Partitions = append(d.Members[i].Partitions, uint32(p))
			if ps.revoking {
				d.Members[i].Revoking = append(d.Members[i].Revoking, uint32(p))
			}
		}
		if i, ok := at[ps.next]; ok && ps.revoking && ps.next != 0 {
			gp.NextOwner = names[i]
		}
		if ps.revoking {
			gp.RevokingSince = nanosTime(ps.waitSince)
		}
		d.Partitions[p] = gp
	}
	return d, true
}

// Groups lists every group whose name starts with prefix, by name.
func (s *State) Groups(prefix string) []GroupInfo {
	names := make([]string, 0, s.groups.byName.len())
	for n := range s.groups.byName.all() {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	out := make([]GroupInfo, 0, len(names))
	for _, n := range names {
		out = append(out, *s.groups.info(n, s.groups.byName.at(n)))
	}
	return out
}

// GroupAssignments are the partitions of member's session lease in group
// and the group's partition count; ok is false if lease is not that
// member's live session.
func (s *State) GroupAssignments(name, member string, lease uint64) (as []Assignment, partitions uint32, ok bool) {
	g := s.groups.byName.at(name)
	if g == nil || lease == 0 || g.members[member] != lease {
		return nil, 0, false
	}
	return g.assignments(lease), uint32(len(g.parts)), true
}

// GroupRevokeTimeout is how long the session lease has to acknowledge a
// revocation in group (its bound, or its TTL).
func (s *State) GroupRevokeTimeout(name string, lease uint64) time.Duration {
	g, l := s.groups.byName.at(name), s.leases.byID.at(lease)
	switch {
	case g == nil || l == nil:
		return 0
	case g.revokeTimeout != 0:
		return g.revokeTimeout
	}
	return l.TTL
}

// GroupStats are totals over every group, for metrics (leasehold/groups.go).
type GroupStats = leasehold.GroupStats

// GroupStats reads the totals.
func (s *State) GroupStats() GroupStats {
	var st GroupStats
	for _, g := range s.groups.byName.all() {
		st.Groups++
		st.Members += len(g.members)
		st.Partitions += len(g.parts)
		st.Rebalances += g.rebalances
		st.Moved += g.moved
		st.Lapsed += g.lapsed
		for p := range g.parts {
			if g.parts[p].revoking {
				st.Pending++
			}
		}
	}
	return st
}
