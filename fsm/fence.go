package fsm

import (
	"math"

	"github.com/leasehold/leasehold/api/leasehold"
)

// A fence names exactly one target, and its token must be current for it:
// a resource's holding lease, a partition's owner's epoch, or a queue key's
// delivery in flight. Anything else is CodeStaleToken, also when the
// target does not exist (any more): a guard must refuse the write, and the
// caller's authority is gone either way.

// The log encoding of a fence starts with a tag. Tags 0 and 1 are the
// bool it was before targets (none, resource), so older entries read as
// they were written and a resource fence is written as before.
const (
	fenceNone      byte = 0
	fenceResource  byte = 1
	fencePartition byte = 2
	fenceQueueKey  byte = 3
)

func encodeFence(e *encoder, f *leasehold.Fence) {
	switch {
	case f == nil:
		e.byte1(fenceNone)
	case f.Group != "":
		e.byte1(fencePartition)
		e.str(f.Group)
		e.uvarint(uint64(f.Partition))
		e.uvarint(f.Token)
	case f.Queue != "":
		e.byte1(fenceQueueKey)
		e.str(f.Queue)
		e.str(f.Key)
		e.uvarint(f.Token)
	default:
		e.byte1(fenceResource)
		e.str(f.Resource)
		e.uvarint(f.Token)
	}
}

func decodeFence(d *decoder) *leasehold.Fence {
	switch d.byte1() {
	case fenceNone:
		return nil
	case fenceResource:
		return &leasehold.Fence{Resource: d.str(), Token: d.uvarint()}
	case fencePartition:
		f := &leasehold.Fence{Group: d.str()}
		p := d.uvarint()
		if p > math.MaxUint32 {
			d.fail()
		}
		f.Partition, f.Token = uint32(p), d.uvarint()
		return f
	case fenceQueueKey:
		return &leasehold.Fence{Queue: d.str(), Key: d.str(), Token: d.uvarint()}
	}
	d.fail()
	return nil
}

// CheckFenceTarget reports whether f's token is current for its target,
// and if not, why (a *leasehold.Error with CodeStaleToken).
func (s *State) CheckFenceTarget(f leasehold.Fence) error {
	switch {
	case f.Group != "":
		return s.groups.checkFence(f)
	case f.Queue != "":
		return s.queues.checkFence(f)
	}
	return s.CheckFence(f.Resource, f.Token)
}

// checkFence (groups) accepts the epoch of the partition's owner, also
// while the partition is revoking (the owner keeps it until it
// acknowledges); once handed over, the old epoch is stale.
func (gs *groupState) checkFence(f leasehold.Fence) error {
	g := gs.byName.at(f.Group)
	if g == nil {
		return leasehold.Errorf(leasehold.CodeStaleToken,
			"fencing token %d for %s is stale: no group %q exists", f.Token, f.Target(), f.Group)
	}
	if int(f.Partition) >= len(g.parts) {
		return leasehold.Errorf(leasehold.CodeStaleToken,
			"fencing token %d for %s is stale: group %q has partitions 0 to %d", f.Token, f.Target(), f.Group, len(g.parts)-1)
	}
	ps := &g.parts[f.Partition]
	if ps.lease == 0 {
		return leasehold.Errorf(leasehold.CodeStaleToken,
			"fencing token %d for %s is stale: no member owns the partition now (its last epoch: %d)", f.Token, f.Target(), ps.epoch)
	}
	if ps.epoch != f.Token {
		return leasehold.Errorf(leasehold.CodeStaleToken,
			"fencing token %d for %s is stale: the partition's owner holds epoch %d", f.Token, f.Target(), ps.epoch)
	}
	return nil
}

// checkFence (queues) accepts the token of the key's delivery in flight;
// after an ack, a nack, a redelivery or the visibility running out, it is
// stale.
func (qs *queueState) checkFence(f leasehold.Fence) error {
	q := qs.byName.at(f.Queue)
	if q == nil {
		return leasehold.Errorf(leasehold.CodeStaleToken,
			"fencing token %d for %s is stale: no queue %q exists", f.Token, f.Target(), f.Queue)
	}
	k := q.keys[f.Key]
	var m *qmsg
	if k != nil && len(k.msgs) > 0 {
		m = k.msgs[0]
	}
	if m == nil || q.inflight[m.seq] != m {
		return leasehold.Errorf(leasehold.CodeStaleToken,
			"fencing token %d for %s is stale: no delivery of the key is in flight", f.Token, f.Target())
	}
	if m.token != f.Token {
		return leasehold.Errorf(leasehold.CodeStaleToken,
			"fencing token %d for %s is stale: the key's delivery in flight (sequence %d) has token %d", f.Token, f.Target(), m.seq, m.token)
	}
	return nil
}
