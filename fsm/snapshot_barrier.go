package fsm

import (
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// barriersVersion is the snapshot version that added the barriers
// section: an older snapshot has none, and restores with no barriers.
const barriersVersion = 15

// The barriers section (version 15): barriers by name. An arrival names
// its lease, which the leases section restores.
func writeBarriers(s *State, e *encoder) {
	writeSortedCow(e, &s.barriers.byName, func(name string, b *barrier) {
		e.str(name)
		e.byte1(byte(b.kind))
		e.uvarint(uint64(b.parties))
		e.varint(int64(b.timeout))
		e.varint(b.createdAt)
		e.uvarint(b.phase)
		e.varint(b.firstAt)
		e.bool(b.tripped)
		e.uvarint(uint64(b.counted))
		e.uvarint(b.trips)
		e.uvarint(b.broken)
		e.uvarint(uint64(len(b.arrivals)))
		for _, a := range b.arrivals {
			e.str(a.participant)
			e.uvarint(a.lease)
			e.varint(a.at)
		}
		e.uvarint(uint64(len(b.ends)))
		for _, end := range b.ends {
			e.uvarint(end.Phase)
			e.byte1(byte(end.Outcome))
			e.uvarint(end.Token)
			e.varint(timeNanos(end.At))
			e.uvarint(uint64(end.Arrived))
		}
	})
}

func readBarriers(s *State, d *decoder, v byte) error {
	if v < barriersVersion {
		return nil
	}
	for range d.count(8) {
		name := d.str()
		b := &barrier{kind: leasehold.BarrierKind(d.byte1()), parties: uint32(d.uvarint()), timeout: time.Duration(d.varint()),
			createdAt: d.varint(), phase: d.uvarint(), firstAt: d.varint(), tripped: d.bool(), counted: uint32(d.uvarint()),
			trips: d.uvarint(), broken: d.uvarint()}
		for range d.count(3) {
			a := arrival{participant: d.str(), lease: d.uvarint(), at: d.varint()}
			if d.err == nil && s.leases.byID.at(a.lease) == nil {
				return errCorrupt // an arrival always has its lease
			}
			b.arrivals = append(b.arrivals, a)
		}
		for range d.count(5) {
			b.ends = append(b.ends, PhaseEnd{Phase: d.uvarint(), Outcome: leasehold.BarrierOutcome(d.byte1()),
				Token: d.uvarint(), At: nanosTime(d.varint()), Arrived: uint32(d.uvarint())})
		}
		if d.err != nil {
			return nil
		}
		if b.phase == 0 || b.parties == 0 || uint32(len(b.arrivals)) >= b.parties && b.kind == leasehold.BarrierCyclic {
			return errCorrupt // a phase that should have tripped
		}
		s.barriers.byName.set(name, b)
	}
	return nil
}
