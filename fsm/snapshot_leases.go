package fsm

import (
	"sort"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// The snapshot sections of the lease area (state.go): leases by id,
// lock-delays by resource, waiters by arrival.

// Version 6 added whether a lease or waiter is an election's, and its
// value.
func encodeElection(e *encoder, election bool, value []byte) {
	e.bool(election)
	if election {
		e.str(string(value))
	}
}

func decodeElection(d *decoder) (bool, []byte) {
	if !d.bool() {
		return false, nil
	}
	return true, []byte(d.str())
}

// Version 4 added a lease's last renewal (key and answer); version 3 had a
// "claimed by a retry" flag instead, which the attempt now says. Version
// 14 renamed leasehold's own leases (snapshot_names.go: decodeLease reads
// the old names as the new).
func writeLeases(s *State, e *encoder) {
	ids := make([]uint64, 0, s.leases.byID.len())
	for id := range s.leases.byID.all() {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	e.uvarint(uint64(len(ids)))
	for _, id := range ids {
		l := s.leases.byID.at(id)
		view := l.view()
		encodeLease(e, &view)
		e.hash(l.secretHash)
		e.varint(int64(l.heldFor))
		e.str(l.key)
		e.str(l.attempt)
		e.str(l.renewKey.String())
		e.varint(int64(l.renewRemaining))
		encodeElection(e, l.election(), l.more().value)
		e.spill()
	}
}

func readLeases(s *State, d *decoder, v byte) error {
	for range d.count(8) {
		l := &lease{}
		var view leasehold.Lease
		decodeLease(d, &view)
		l.leaseFields = fieldsOf(&view)
		l.secretHash = d.hash()
		l.heldFor = time.Duration(d.varint())
		l.key = d.str()
		l.attempt = d.str()
		if v < 4 && d.bool() {
			l.attempt = "" // claimed by a retry (version 3): no Cancel matches
		}
		if v >= 4 {
			l.renewKey = readRenewDigest(d.str())
			l.renewRemaining = time.Duration(d.varint())
		}
		if v >= 6 {
			if election, value := decodeElection(d); election {
				m := l.setMore()
				m.election, m.value = election, value
			}
		}
		if d.err != nil {
			return nil
		}
		// Refuse a state Apply could never have made: it would break
		// mutual exclusion or token monotonicity on this replica only.
		if l.ID == 0 || l.Token != l.ID || l.Token > s.lastToken || s.leases.byID.at(l.ID) != nil || len(l.Resources) == 0 ||
			l.election() && len(l.Resources) != 1 {
			return errCorrupt
		}
		s.leases.byID.set(l.ID, l)
		l.Owner, l.Operation = s.leases.owners.take(l.Owner), s.leases.operations.take(l.Operation)
		for _, r := range l.Resources {
			if _, held := s.leases.holders.get(r); held {
				return errCorrupt
			}
			s.leases.holders.set(r, l.ID)
		}
		if l.election() {
			s.elections.granted(l)
		}
	}
	return nil
}

func writeBlocks(s *State, e *encoder) {
	writeSortedCow(e, &s.leases.blocks, func(r string, b block) {
		e.str(r)
		e.uvarint(b.token)
		e.varint(int64(b.delay))
	})
}

func readBlocks(s *State, d *decoder, _ byte) error {
	for range d.count(3) {
		r := legacyName(d.str())
		b := block{token: d.uvarint(), delay: time.Duration(d.varint())}
		if _, dup := s.leases.blocks.get(r); dup || b.token > s.lastToken {
			return errCorrupt
		}
		s.leases.blocks.set(r, b)
	}
	return nil
}

// Version 5 keys a waiter by its request ID scoped to its caller, with its
// fingerprint; before, by the bare request ID (and its acquire has no
// caller: the decoder is legacy).
func writeWaiters(s *State, e *encoder) {
	ws := make([]*waiter, 0, s.leases.waiters.len())
	for _, w := range s.leases.waiters.all() {
		ws = append(ws, w)
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].arrival < ws[j].arrival })
	e.uvarint(uint64(len(ws)))
	for _, w := range ws {
		w.Acquire.encodeBody(e)
		e.uvarint(w.arrival)
		e.varint(w.queuedAt)
		e.str(w.key)
		e.b = append(e.b, w.sum[:]...)
		if c, ok := w.ask.(*Campaign); ok {
			encodeElection(e, true, c.Value)
		} else {
			encodeElection(e, false, nil)
		}
		e.spill()
	}
}

func readWaiters(s *State, d *decoder, v byte) error {
	lastArrival := uint64(0)
	for range d.count(8) {
		var a Acquire
		a.decode(d)
		legacyNames(a.Resources)
		w := newWaiter(&a)
		w.arrival = d.uvarint()
		w.queuedAt = d.varint()
		if v < 4 && d.bool() {
			w.Attempt = "" // claimed by a retry (version 3): no Cancel matches
		}
		if v >= 5 {
			w.key, w.sum = d.str(), d.fingerprint()
		} else {
			w.key = w.RequestID // legacy: unscoped, no fingerprint
		}
		if v >= 6 {
			if election, value := decodeElection(d); election {
				c := &Campaign{Acquire: a, Value: value}
				w.ask, w.Acquire = c, &c.Acquire
			}
		}
		if d.err != nil {
			return nil
		}
		if w.key == "" || w.RequestID == "" || s.leases.waiters.at(w.key) != nil || w.arrival <= lastArrival ||
			w.arrival > s.leases.nextArrival || len(w.Resources) == 0 {
			return errCorrupt
		}
		lastArrival = w.arrival
		s.leases.waiters.set(w.key, w)
		for _, r := range w.Resources {
			s.leases.lines[r] = append(s.leases.lines[r], w)
		}
	}
	return nil
}
