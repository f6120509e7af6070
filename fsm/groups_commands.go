package fsm

import (
	"math"
	"time"
)

// The commands of partition groups (groups.go). A member's session is a
// lease, so it is renewed with the ordinary Renew; Leave ends it like a
// Release, with the same dedup. GroupLapse is the leader's: a revocation
// was not acknowledged in time.

const (
	KindGroupCreate  Kind = 50
	KindGroupGrow    Kind = 51
	KindGroupDelete  Kind = 52
	KindGroupJoin    Kind = 53
	KindGroupLeave   Kind = 54
	KindGroupRevoked Kind = 55 // a member acknowledged a revocation
	KindGroupLapse   Kind = 56 // a revocation's bound ran out on the leader

	// KindGroupJoinNamed is a Join written since the sessions are named
	// under leasehold.ReservedPrefix (snapshot_names.go): the same body as
	// KindGroupJoin, so that an older node, which would name the session
	// the old way, stops at it ("upgrade it") rather than guess.
	KindGroupJoinNamed Kind = 80
)

// GroupCreate makes a group, or is answered with the group as it is if
// one of that name exists with the same settings (so a retry is safe).
type GroupCreate struct {
	Group      string
	Partitions uint32
	// RevokeTimeout bounds a revocation's acknowledgement (0: the member's
	// session TTL).
	RevokeTimeout time.Duration
	Caller        string
}

// GroupGrow raises a group's partition count; the same count is a no-op.
type GroupGrow struct {
	Group      string
	Partitions uint32
	Caller     string
}

// GroupDelete removes a group and ends every member's session (audited).
type GroupDelete struct {
	Group  string
	Actor  string
	Reason string
}

// GroupJoin starts Member's session (a lease of TTL) in Group. A retry
// carrying the live session's secret is answered with that session.
type GroupJoin struct {
	Group      string
	Member     string
	TTL        time.Duration
	Metadata   map[string]string
	SecretHash [32]byte
	Caller     string
	oldKind    bool // decoded from KindGroupJoin
}

// GroupLeave ends a member's session, proven by its secret.
type GroupLeave struct {
	RequestID  string
	LeaseID    uint64
	SecretHash [32]byte
	Caller     string
}

// GroupRevoked acknowledges that the member stopped working on Partition,
// whose grant of Epoch was being revoked from it.
type GroupRevoked struct {
	Group      string
	Member     string
	LeaseID    uint64
	SecretHash [32]byte
	Partition  uint32
	Epoch      uint64
}

// GroupLapse ends the session of the member that did not acknowledge the
// revocation of Partition's grant Epoch within the group's bound.
type GroupLapse struct {
	Group     string
	LeaseID   uint64
	Partition uint32
	Epoch     uint64
}

func (*GroupCreate) Kind() Kind { return KindGroupCreate }
func (*GroupGrow) Kind() Kind   { return KindGroupGrow }
func (*GroupDelete) Kind() Kind { return KindGroupDelete }
func (c *GroupJoin) Kind() Kind {
	if c.oldKind {
		return KindGroupJoin
	}
	return KindGroupJoinNamed
}
func (*GroupLeave) Kind() Kind   { return KindGroupLeave }
func (*GroupRevoked) Kind() Kind { return KindGroupRevoked }
func (*GroupLapse) Kind() Kind   { return KindGroupLapse }

func (c *GroupCreate) apply(s *State, ix uint64, now int64) Result { return s.groups.create(now, c) }
func (c *GroupGrow) apply(s *State, ix uint64, now int64) Result   { return s.groups.grow(ix, now, c) }
func (c *GroupDelete) apply(s *State, ix uint64, now int64) Result {
	return s.groups.delete(ix, now, c)
}
func (c *GroupJoin) apply(s *State, ix uint64, now int64) Result  { return s.groups.join(ix, now, c) }
func (c *GroupLeave) apply(s *State, ix uint64, now int64) Result { return s.groups.leave(now, c) }
func (c *GroupRevoked) apply(s *State, ix uint64, now int64) Result {
	return s.groups.revoked(ix, now, c)
}
func (c *GroupLapse) apply(s *State, ix uint64, now int64) Result { return s.groups.lapse(c) }

func (c *GroupCreate) encode(e *encoder) {
	e.str(c.Group)
	e.uvarint(uint64(c.Partitions))
	e.varint(int64(c.RevokeTimeout))
	e.str(c.Caller)
}

func (c *GroupCreate) decode(d *decoder) {
	c.Group = d.str()
	c.Partitions = d.uint32v()
	c.RevokeTimeout = time.Duration(d.varint())
	c.Caller = d.str()
}

func (c *GroupGrow) encode(e *encoder) {
	e.str(c.Group)
	e.uvarint(uint64(c.Partitions))
	e.str(c.Caller)
}

func (c *GroupGrow) decode(d *decoder) {
	c.Group = d.str()
	c.Partitions = d.uint32v()
	c.Caller = d.str()
}

func (c *GroupDelete) encode(e *encoder) {
	e.str(c.Group)
	e.str(c.Actor)
	e.str(c.Reason)
}

func (c *GroupDelete) decode(d *decoder) {
	c.Group = d.str()
	c.Actor = d.str()
	c.Reason = d.str()
}

func (c *GroupJoin) encode(e *encoder) {
	e.str(c.Group)
	e.str(c.Member)
	e.varint(int64(c.TTL))
	e.strMap(c.Metadata)
	e.hash(c.SecretHash)
	e.str(c.Caller)
}

func (c *GroupJoin) decode(d *decoder) {
	c.Group = d.str()
	c.Member = d.str()
	c.TTL = time.Duration(d.varint())
	c.Metadata = d.strMap()
	c.SecretHash = d.hash()
	c.Caller = d.str()
}

func (c *GroupLeave) encode(e *encoder) {
	e.str(c.RequestID)
	e.uvarint(c.LeaseID)
	e.hash(c.SecretHash)
	e.str(c.Caller)
}

func (c *GroupLeave) decode(d *decoder) {
	c.RequestID = d.str()
	c.LeaseID = d.uvarint()
	c.SecretHash = d.hash()
	c.Caller = d.str()
}

func (c *GroupLeave) key() string { return requestKey(c.Caller, c.SecretHash, c.RequestID) }

func (c *GroupLeave) sum(e *encoder) fingerprint {
	if !e.startSum(false, c.RequestID) {
		return fingerprint{}
	}
	e.uvarint(c.LeaseID)
	return sumOf(e)
}

func (c *GroupRevoked) encode(e *encoder) {
	e.str(c.Group)
	e.str(c.Member)
	e.uvarint(c.LeaseID)
	e.hash(c.SecretHash)
	e.uvarint(uint64(c.Partition))
	e.uvarint(c.Epoch)
}

func (c *GroupRevoked) decode(d *decoder) {
	c.Group = d.str()
	c.Member = d.str()
	c.LeaseID = d.uvarint()
	c.SecretHash = d.hash()
	c.Partition = d.uint32v()
	c.Epoch = d.uvarint()
}

func (c *GroupLapse) encode(e *encoder) {
	e.str(c.Group)
	e.uvarint(c.LeaseID)
	e.uvarint(uint64(c.Partition))
	e.uvarint(c.Epoch)
}

func (c *GroupLapse) decode(d *decoder) {
	c.Group = d.str()
	c.LeaseID = d.uvarint()
	c.Partition = d.uint32v()
	c.Epoch = d.uvarint()
}

// uint32v reads a uvarint that must fit 32 bits (a partition number or
// count).
func (d *decoder) uint32v() uint32 {
	v := d.uvarint()
	if v > math.MaxUint32 {
		d.fail()
		return 0
	}
	return uint32(v)
}
