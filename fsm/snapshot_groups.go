package fsm

import "time"

// The groups section (version 9): groups by name, each with its settings,
// counters, members by name (with their session lease, which the leases
// section restores) and every partition by number.
func writeGroups(s *State, e *encoder) {
	writeSortedCow(e, &s.groups.byName, func(name string, g *group) {
		e.str(name)
		e.varint(int64(g.revokeTimeout))
		e.varint(g.createdAt)
		e.uvarint(g.rebalances)
		e.uvarint(g.moved)
		e.uvarint(g.lapsed)
		writeSorted(e, g.members, func(m string, id uint64) {
			e.str(m)
			e.uvarint(id)
		})
		e.uvarint(uint64(len(g.parts)))
		for p := range g.parts {
			ps := &g.parts[p]
			e.uvarint(ps.lease)
			e.uvarint(ps.epoch)
			e.varint(ps.since)
			e.uvarint(ps.next)
			e.varint(ps.waitSince)
			e.bool(ps.revoking)
		}
	})
}

func readGroups(s *State, d *decoder, v byte) error {
	if v < 9 {
		return nil // older snapshots have no groups
	}
	for range d.count(8) {
		name := d.str()
		g := &group{revokeTimeout: time.Duration(d.varint()), createdAt: d.varint(),
			rebalances: d.uvarint(), moved: d.uvarint(), lapsed: d.uvarint(), members: make(map[string]uint64)}
		for range d.count(2) {
			m, id := d.str(), d.uvarint()
			if d.err != nil {
				return nil
			}
			if l := s.leases.byID.at(id); l == nil || l.Resources[0] != GroupMemberResource(name, m) {
				return errCorrupt // a member always has its session lease
			}
			g.members[m] = id
		}
		live := make(map[uint64]bool, len(g.members))
		for _, id := range g.members {
			live[id] = true
		}
		n := d.count(6) // a partition takes six bytes at least
		if d.err != nil {
			return nil
		}
		if n < 1 || n > MaxGroupPartitions {
			return errCorrupt
		}
		g.parts = make([]partition, n)
		for p := range g.parts {
			ps := &g.parts[p]
			ps.lease, ps.epoch, ps.since, ps.next, ps.waitSince, ps.revoking =
				d.uvarint(), d.uvarint(), d.varint(), d.uvarint(), d.varint(), d.bool()
			if d.err != nil {
				return nil
			}
			if ps.epoch > s.lastToken || (ps.lease != 0 && !live[ps.lease]) || (ps.next != 0 && !live[ps.next]) || (ps.revoking && ps.lease == 0) {
				return errCorrupt // owners are members; epochs were issued
			}
		}
		s.groups.byName.set(name, g)
	}
	return nil
}
