package fsm

import (
	"maps"
	"sort"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// Partition groups: a group has a fixed (growable) number of partitions
// and members whose sessions are leases on the internal resource
// GroupMemberResource(group, member), renewed with the ordinary Renew and
// ended like any lease (Leave = release, expiry, forced). On every change
// of membership or size, apply recomputes the assignment: each member's
// share is within one partition of every other's, and a member keeps what
// it has unless it holds more than its share (sticky).
//
// A partition's grant carries an epoch, a fencing token from nextToken:
// strictly increasing per partition. A partition never has two owners: to
// move it from A to B, it first becomes revoking for A (A still owns it);
// B gets it with a new epoch only when A acknowledges (GroupRevoked) or
// A's session ends. The leader bounds the acknowledgement (GroupObserver)
// and proposes a GroupLapse when the bound passes, which ends A's session.
//
// Every grant, revocation and loss is an event (EventGroupAssigned,
// EventGroupRevoking, EventGroupRemoved) carrying the member's session
// lease and resource, so a member's assignment stream is a watch.

// Limits of groups (leasehold/groups.go).
const (
	MaxGroupPartitions = leasehold.MaxGroupPartitions
	MaxGroupMembers    = leasehold.MaxGroupMembers
	MaxGroups          = leasehold.MaxGroups
	MaxGroupNameLen    = leasehold.MaxGroupNameLen
	MaxGroupMemberLen  = leasehold.MaxGroupMemberLen
)

// GroupResource is the prefix of the group's member resources and the
// resource of its own events (created, grown, deleted), under
// leasehold.ReservedPrefix, which the API refuses to callers, so no caller
// can acquire one (leasehold.GroupSessionResource).
func GroupResource(group string) string { return leasehold.GroupSessionResource(group, "") }

// GroupMemberResource is the resource of member's session leases:
// "@leasehold/group/GROUP/MEMBER".
func GroupMemberResource(group, member string) string {
	return leasehold.GroupSessionResource(group, member)
}

// GroupMemberOf is the group and member a session lease's resource stands
// for.
func GroupMemberOf(resource string) (group, member string, ok bool) {
	return leasehold.GroupSessionOf(resource)
}

// The group sub-state: the groups by name. A member's session is a lease
// (the lease sub-state's); a group keeps which session owns each
// partition.
type groupState struct {
	st     *State
	byName cowMap[string, *group]
}

func (gs *groupState) init(s *State) {
	*gs = groupState{st: s, byName: newCowMap[string, *group]()}
	s.track(&gs.byName)
}

func (gs *groupState) captureInto(v *State) { v.groups = groupState{st: v, byName: gs.byName.freeze()} }

func (gs *groupState) eachCountdown(f func(Countdown)) {
	for name, g := range gs.byName.all() {
		for p := range g.parts {
			if ps := &g.parts[p]; ps.revoking {
				f(revocationCountdown(name, ps.lease, uint32(p), ps.epoch, gs.st.GroupRevokeTimeout(name, ps.lease)))
			}
		}
	}
}

type group struct {
	parts         []partition
	revokeTimeout time.Duration // 0: the revoked member's session TTL
	createdAt     int64
	members       map[string]uint64 // member -> session lease
	rebalances    uint64            // assignment changes
	moved         uint64            // partitions that changed target member (or lost it to a leave)
	lapsed        uint64            // revocations ended by the bound
}

// partition is one partition's owner; 48 bytes, so a group of 65,536
// partitions costs about 3 MiB.
type partition struct {
	lease     uint64 // the owner's session (0: none)
	epoch     uint64 // the last grant's fencing token
	since     int64  // the last grant, leader's wall clock
	next      uint64 // revoking: the session it goes to (0: none yet)
	waitSince int64  // revoking, or unowned after a loss: since when (0: not waiting)
	revoking  bool
}

// target is the session the assignment gives p to: while revoking, or
// unowned after its revoking owner ended, the next in line.
func (p *partition) target() uint64 {
	if p.revoking || p.lease == 0 {
		return p.next
	}
	return p.lease
}

// GroupObserver hears, inside Apply, about hand-offs, for metrics (the
// bound of a revocation is a countdown: countdown.go). An Observer that
// implements it receives the calls.
type GroupObserver interface {
	// GroupHandedOff: a partition waited this long (leader wall clock)
	// between its owner being asked to give it up, or lost, and its next
	// grant.
	GroupHandedOff(group string, wait time.Duration)
}

func (gs *groupState) observer() GroupObserver {
	s := gs.st
	o, _ := s.hooks.obs.(GroupObserver)
	return o
}

// GroupInfo is what a group command answers and inspection shows, and
// Assignment one partition of a member (leasehold/groups.go).
type (
	GroupInfo  = leasehold.GroupInfo
	Assignment = leasehold.Assignment
)

// groupAnswer is a group command's answer in a Result: a GroupInfo
// (defined here, as leasehold's type cannot carry the answer method).
type groupAnswer GroupInfo

func (*groupAnswer) answer() {}

// Group is a group command's answer, nil for none.
func (r Result) Group() *GroupInfo {
	a, _ := r.Answer.(*groupAnswer)
	return (*GroupInfo)(a)
}

// ValidateForcedResource checks the resource a forced release (or an
// inspection) names, as the API edge does (leasehold.ValidateForcedResource).
func ValidateForcedResource(r string) error { return leasehold.ValidateForcedResource(r) }

func validGroupName(name string) error {
	return leasehold.ValidateName("group", name, MaxGroupNameLen, true)
}

func (gs *groupState) of(name string) (*group, error) {
	if err := validGroupName(name); err != nil {
		return nil, err
	}
	g, _ := gs.byName.mut(name) // every caller changes it
	if g == nil {
		return nil, leasehold.Errorf(leasehold.CodeNotFound, "group %q does not exist; create it first", name)
	}
	return g, nil
}

func (gs *groupState) create(now int64, c *GroupCreate) Result {
	if err := validGroupName(c.Group); err != nil {
		return Result{Err: err}
	}
	if c.Partitions < 1 || c.Partitions > MaxGroupPartitions {
		return Result{Err: leasehold.Errorf(leasehold.CodeInvalid,
			"partitions is %d; it must be between 1 and %d", c.Partitions, MaxGroupPartitions)}
	}
	if c.RevokeTimeout != 0 {
		if err := leasehold.ValidateDuration("revoke_timeout", c.RevokeTimeout, leasehold.MinTTL, leasehold.MaxTTL); err != nil {
			return Result{Err: err}
		}
	}
	if g := gs.byName.at(c.Group); g != nil {
		if uint32(len(g.parts)) == c.Partitions && g.revokeTimeout == c.RevokeTimeout {
			return Result{Dup: true, Answer: (*groupAnswer)(gs.info(c.Group, g))}
		}
		return Result{Err: leasehold.Errorf(leasehold.CodeHeld,
			"group %q already exists with %d partitions and revoke timeout %v", c.Group, len(g.parts), g.revokeTimeout)}
	}
	if gs.byName.len() >= MaxGroups {
		return Result{Err: leasehold.Errorf(leasehold.CodeLimit, "there are %d groups already (limit %d); delete one first", gs.byName.len(), MaxGroups)}
	}
	g := &group{parts: make([]partition, c.Partitions), revokeTimeout: c.RevokeTimeout, createdAt: now,
		members: make(map[string]uint64)}
	gs.byName.set(c.Group, g)
	gs.emitGroup(c.Group, c.Partitions)
	return Result{Answer: (*groupAnswer)(gs.info(c.Group, g))}
}

func (gs *groupState) grow(ix uint64, now int64, c *GroupGrow) Result {
	g, err := gs.of(c.Group)
	if err != nil {
		return Result{Err: err}
	}
	n := uint32(len(g.parts))
	switch {
	case c.Partitions > MaxGroupPartitions:
		return Result{Err: leasehold.Errorf(leasehold.CodeInvalid,
			"partitions is %d; the limit is %d", c.Partitions, MaxGroupPartitions)}
	case c.Partitions < n:
		return Result{Err: leasehold.Errorf(leasehold.CodeNotHolder,
			"group %q has %d partitions; a group never shrinks (asked for %d)", c.Group, n, c.Partitions)}
	case c.Partitions == n:
		return Result{Dup: true, Answer: (*groupAnswer)(gs.info(c.Group, g))}
	}
	g.parts = append(g.parts, make([]partition, c.Partitions-n)...)
	gs.emitGroup(c.Group, c.Partitions)
	gs.rebalance(ix, now, c.Group, g)
	return Result{Answer: (*groupAnswer)(gs.info(c.Group, g))}
}

func (gs *groupState) delete(ix uint64, now int64, c *GroupDelete) Result {
	s := gs.st
	g, err := gs.of(c.Group)
	if err != nil {
		return Result{Err: err}
	}
	if err := leasehold.ValidateName("actor", c.Actor, leasehold.MaxOwnerLen, true); err != nil {
		return Result{Err: err}
	}
	if err := leasehold.ValidateName("reason", c.Reason, MaxReasonLen, true); err != nil {
		return Result{Err: err}
	}
	info := gs.info(c.Group, g)
	// Gone first: the sessions ended below find no group to rebalance.
	gs.byName.del(c.Group)
	for p := range g.parts {
		if ps := &g.parts[p]; ps.revoking {
			s.disarm(revocationKey(c.Group, uint32(p), ps.epoch))
		}
	}
	for _, m := range sortedKeys(g.members) {
		if l := s.leases.byID.at(g.members[m]); l != nil {
			s.leases.end(l, EndForced)
		}
	}
	s.auditName(ix, now, c.Actor, "group-delete", c.Group, c.Reason)
	gs.emitGroup(c.Group, 0)
	return Result{Answer: (*groupAnswer)(info)}
}

func (gs *groupState) join(ix uint64, now int64, c *GroupJoin) Result {
	s := gs.st
	g, err := gs.of(c.Group)
	if err != nil {
		return Result{Err: err}
	}
	if err := leasehold.ValidateName("member", c.Member, MaxGroupMemberLen, true); err != nil {
		return Result{Err: err}
	}
	if id, ok := g.members[c.Member]; ok {
		l := s.leases.byID.at(id)
		if l.secretHash == c.SecretHash && (l.TTL != c.TTL || !maps.Equal(l.more().Metadata, c.Metadata)) {
			return Result{Err: leasehold.Errorf(leasehold.CodeInvalid,
				"member %q of group %q has a session under this secret with another ttl or metadata: a retry must repeat its Join; "+
					"a new Join needs a new secret once the session ended", c.Member, c.Group)}
		}
		if l.secretHash == c.SecretHash { // a retry of the Join that started it
			view := l.view()
			info := gs.info(c.Group, g)
			info.Assignments = g.assignments(id)
			return Result{Lease: &view, Remaining: l.TTL, Dup: true, Answer: (*groupAnswer)(info)}
		}
		return Result{Err: leasehold.Errorf(leasehold.CodeHeld,
			"member %q of group %q already has a session (lease %d): leave it, or wait for it to lapse", c.Member, c.Group, id)}
	}
	if err := leasehold.ValidateMetadata(c.Metadata); err != nil {
		return Result{Err: err}
	}
	if err := leasehold.ValidateDuration("ttl", c.TTL, leasehold.MinTTL, leasehold.MaxTTL); err != nil {
		return Result{Err: err}
	}
	if len(g.members) >= MaxGroupMembers {
		return Result{Err: leasehold.Errorf(leasehold.CodeLimit,
			"group %q has %d members already (limit %d)", c.Group, len(g.members), MaxGroupMembers)}
	}
	if err := s.leases.ownerLimit(c.Member); err != nil {
		return Result{Err: err}
	}
	l := s.leases.grant(ix, now, &Acquire{Resources: []string{GroupMemberResource(c.Group, c.Member)}, Owner: c.Member,
		Operation: "group-member", TTL: c.TTL, Metadata: c.Metadata, SecretHash: c.SecretHash, Caller: c.Caller}, "")
	g.members[c.Member] = l.ID
	gs.rebalance(ix, now, c.Group, g)
	info := gs.info(c.Group, g)
	info.Assignments = g.assignments(l.ID)
	return Result{Lease: l, Remaining: l.TTL, Answer: (*groupAnswer)(info)}
}

func (gs *groupState) leave(now int64, c *GroupLeave) Result {
	s := gs.st
	if err := validateRequestID(c.RequestID); err != nil {
		return Result{Err: err}
	}
	key, sum := c.key(), c.sum(&s.scratch)
	if r, ok := s.dedup.lookup(key, c.RequestID, KindGroupLeave, sum); ok {
		return r
	}
	var r Result
	if l, err := s.leases.holderOf(c.LeaseID, c.SecretHash, "leave with"); err != nil {
		r = Result{Err: err}
	} else if _, _, ok := GroupMemberOf(l.Resources[0]); !ok {
		r = Result{Err: leasehold.Errorf(leasehold.CodeInvalid,
			"lease %d is not a group member's session; release it with Leases.Release", l.ID)}
	} else {
		r = Result{Lease: s.leases.end(l, EndReleased)}
	}
	s.dedup.put(key, KindGroupLeave, sum, now, r, s.cfg)
	return r
}

func (gs *groupState) revoked(ix uint64, now int64, c *GroupRevoked) Result {
	s := gs.st
	g, err := gs.of(c.Group)
	if err != nil {
		return Result{Err: err}
	}
	if _, err := s.leases.holderOf(c.LeaseID, c.SecretHash, "acknowledge a revocation with"); err != nil {
		return Result{Err: err}
	}
	if g.members[c.Member] != c.LeaseID {
		return Result{Err: leasehold.Errorf(leasehold.CodeNotHolder,
			"lease %d is not the session of member %q in group %q", c.LeaseID, c.Member, c.Group)}
	}
	if c.Partition >= uint32(len(g.parts)) {
		return Result{Err: leasehold.Errorf(leasehold.CodeInvalid,
			"partition %d does not exist: group %q has %d partitions", c.Partition, c.Group, len(g.parts))}
	}
	ps := &g.parts[c.Partition]
	switch {
	case ps.lease == c.LeaseID && ps.epoch == c.Epoch && ps.revoking:
		gs.giveUp(c.Group, g, c.Partition)
		if ps.lease == 0 {
			gs.rebalance(ix, now, c.Group, g) // nobody was next: share it out again
		}
		return Result{}
	case ps.lease == c.LeaseID && ps.epoch == c.Epoch:
		return Result{Err: leasehold.Errorf(leasehold.CodeNotHolder,
			"partition %d (epoch %d) is not being revoked from member %q: keep working on it", c.Partition, c.Epoch, c.Member)}
	case c.Epoch < ps.epoch:
		// The member's session is alive, so it lost that grant by an
		// acknowledgement: this is a retry.
		return Result{Dup: true}
	}
	return Result{Err: leasehold.Errorf(leasehold.CodeStaleToken,
		"epoch %d is not member %q's grant of partition %d (its current epoch is %d)", c.Epoch, c.Member, c.Partition, ps.epoch)}
}

// giveUp ends the revoking owner's grant of p and hands p to the session
// next in line, if any.
func (gs *groupState) giveUp(name string, g *group, p uint32) {
	s := gs.st
	ps := &g.parts[p]
	if ps.revoking {
		s.disarm(revocationKey(name, p, ps.epoch))
	}
	gs.emitPartition(EventGroupRemoved, name, s.leases.byID.at(ps.lease), p, ps.epoch)
	next := ps.next
	ps.lease, ps.next, ps.revoking = 0, 0, false
	if next != 0 {
		gs.grantPartition(name, g, p, next)
	}
}

func (gs *groupState) lapse(c *GroupLapse) Result {
	s := gs.st
	g := gs.byName.at(c.Group)
	if g == nil || c.Partition >= uint32(len(g.parts)) {
		return Result{}
	}
	ps := &g.parts[c.Partition]
	l := s.leases.byID.at(c.LeaseID)
	if !ps.revoking || ps.lease != c.LeaseID || ps.epoch != c.Epoch || l == nil {
		return Result{} // acknowledged or ended since the leader decided
	}
	g, _ = gs.byName.mut(c.Group)
	g.lapsed++
	return Result{Lease: s.leases.end(l, EndExpired)}
}

// groupMemberEnded frees the partitions of a session lease that ended
// and shares them out among the members left.
func (gs *groupState) leaseEnded(l *lease) {
	s := gs.st
	name, member, ok := GroupMemberOf(l.Resources[0])
	if !ok {
		return
	}
	g := gs.byName.at(name)
	if g == nil || g.members[member] != l.ID {
		return
	}
	g, _ = gs.byName.mut(name)
	delete(g.members, member)
	for p := range g.parts {
		ps := &g.parts[p]
		if ps.target() == l.ID && len(g.members) > 0 {
			g.moved++ // to whoever the rebalance below gives it
		}
		if ps.next == l.ID {
			ps.next = 0
		}
		if ps.lease != l.ID {
			continue
		}
		if ps.revoking {
			s.disarm(revocationKey(name, uint32(p), ps.epoch))
		}
		gs.emitPartition(EventGroupRemoved, name, l, uint32(p), ps.epoch)
		if !ps.revoking {
			ps.waitSince = s.now
		}
		// A revoking partition keeps its next in line: the assignment
		// stands, only the hand-off comes sooner.
		ps.lease, ps.revoking = 0, false
	}
	gs.rebalance(s.lastIndex, s.now, name, g)
}

// rebalance recomputes the assignment of g and acts on it: unowned
// partitions are granted at once, and owned ones whose target changed
// start being revoked. Deterministic: members are taken in name order.
func (gs *groupState) rebalance(ix uint64, now int64, name string, g *group) {
	s := gs.st
	names := sortedKeys(g.members)
	m := len(names)
	if m == 0 {
		return
	}
	index := make(map[uint64]int, m)
	for i, n := range names {
		index[g.members[n]] = i
	}
	n := len(g.parts)
	target := make([]int, n) // member index, or -1
	count := make([]int, m)
	for p := range g.parts {
		target[p] = -1
		if t := g.parts[p].target(); t != 0 {
			if i, ok := index[t]; ok {
				target[p] = i
				count[i]++
			}
		}
	}
	before := append([]int(nil), target...)
	// Shares: the members holding most keep the one extra partition, so
	// nobody gives up a partition it need not.
	order := make([]int, m)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return count[order[a]] > count[order[b]] })
	quota := make([]int, m)
	for k, i := range order {
		quota[i] = n / m
		if k < n%m {
			quota[i]++
		}
	}
	// Members over their share give up partitions, those still on their
	// way to them first, then the highest numbered.
	for i := range m {
		for pass := 0; pass < 2 && count[i] > quota[i]; pass++ {
			for p := n - 1; p >= 0 && count[i] > quota[i]; p-- {
				owned := g.parts[p].lease == g.members[names[i]]
				if target[p] == i && owned == (pass == 1) {
					target[p] = -1
					count[i]--
				}
			}
		}
	}
	// Members under their share take the free partitions, lowest first.
	i := 0
	for p := range g.parts {
		if target[p] != -1 {
			continue
		}
		for count[i] >= quota[i] {
			i++
		}
		target[p] = i
		count[i]++
	}
	changed := false
	for p := range g.parts {
		if before[p] != target[p] {
			changed = true
			if before[p] != -1 {
				g.moved++
			}
		}
		ps := &g.parts[p]
		t := g.members[names[target[p]]]
		switch {
		case ps.lease == 0:
			gs.grantPartition(name, g, uint32(p), t)
		case before[p] == target[p]:
		case ps.revoking:
			ps.next = t
		default:
			ps.revoking, ps.next, ps.waitSince = true, t, now
			gs.emitPartition(EventGroupRevoking, name, s.leases.byID.at(ps.lease), uint32(p), ps.epoch)
			s.armRevocation(name, ps.lease, uint32(p), ps.epoch, s.GroupRevokeTimeout(name, ps.lease))
		}
	}
	if changed {
		g.rebalances++
	}
}

// grantPartition gives p to session lease with a new epoch.
func (gs *groupState) grantPartition(name string, g *group, p uint32, lease uint64) {
	s := gs.st
	ps := &g.parts[p]
	ps.lease, ps.epoch, ps.since = lease, s.nextToken(s.lastIndex), s.now
	if ps.waitSince != 0 {
		if o := gs.observer(); o != nil {
			o.GroupHandedOff(name, time.Duration(s.now-ps.waitSince))
		}
	}
	ps.waitSince, ps.next, ps.revoking = 0, 0, false
	gs.emitPartition(EventGroupAssigned, name, s.leases.byID.at(lease), p, ps.epoch)
}

// emitPartition reports a change of partition p for session l (which
// may have just ended: its resource is what watchers select it by).
func (gs *groupState) emitPartition(k EventKind, name string, l *lease, p uint32, epoch uint64) {
	s := gs.st
	if s.hooks.sink != nil {
		s.emit(Event{Kind: k, Group: name, Partition: p, LeaseID: l.ID, Token: epoch, Resources: l.Resources, Owner: l.Owner})
	}
}

// emitGroup reports a group created or grown (Partition: its partition
// count) or deleted (0).
func (gs *groupState) emitGroup(name string, partitions uint32) {
	s := gs.st
	if s.hooks.sink != nil {
		s.emit(Event{Kind: EventGroupChanged, Group: name, Partition: partitions,
			Resources: []string{GroupResource(name)}})
	}
}

// assignments are the partitions session lease holds, by number.
func (g *group) assignments(lease uint64) []Assignment {
	var out []Assignment
	for p := range g.parts {
		if ps := &g.parts[p]; ps.lease == lease {
			out = append(out, Assignment{Partition: uint32(p), Epoch: ps.epoch, Revoking: ps.revoking})
		}
	}
	return out
}

func (gs *groupState) info(name string, g *group) *GroupInfo {
	info := &GroupInfo{Name: name, Partitions: uint32(len(g.parts)), RevokeTimeout: g.revokeTimeout,
		CreatedAt: nanosTime(g.createdAt), Members: len(g.members), Rebalances: g.rebalances,
		Moved: g.moved, Lapsed: g.lapsed}
	for p := range g.parts {
		switch ps := &g.parts[p]; {
		case ps.lease == 0:
			info.Unowned++
		case ps.revoking:
			info.PendingRevocations++
		}
	}
	return info
}
