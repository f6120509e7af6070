package fsm

import (
	"sort"

	"github.com/leasehold/leasehold/api/leasehold"
)

// The semaphores section (version 10, semaphore.go): which leases hold a
// semaphore's slot and which waiters await one, with the name and limit.
// It comes after the leases and waiters it annotates, so their sections'
// bytes are as before; the per-name counts are rebuilt from it.
func writeSems(s *State, e *encoder) {
	var ids []uint64
	for id, l := range s.leases.byID.all() {
		if l.Limit() > 0 {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	e.uvarint(uint64(len(ids)))
	for _, id := range ids {
		l := s.leases.byID.at(id)
		e.uvarint(id)
		e.str(l.Semaphore())
		e.uvarint(uint64(l.Limit()))
	}
	var ws []*waiter
	for _, w := range s.leases.waiters.all() {
		if _, ok := w.ask.(*SemAcquire); ok {
			ws = append(ws, w)
		}
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].arrival < ws[j].arrival })
	e.uvarint(uint64(len(ws)))
	for _, w := range ws {
		e.str(w.key)
		e.uvarint(uint64(w.ask.(*SemAcquire).Limit))
	}
}

func readSems(s *State, d *decoder, v byte) error {
	if v < 10 {
		return nil
	}
	for range d.count(3) {
		id, name, limit := d.uvarint(), d.str(), decodeLimit(d)
		l := s.leases.byID.at(id)
		if d.err != nil {
			return nil
		}
		if l == nil || l.Limit() != 0 || l.election() || !s.sems.fits(name, limit) || len(l.Resources) != 1 {
			return errCorrupt
		}
		m := l.setMore()
		m.Semaphore, m.Limit = name, limit
		s.sems.join(name, limit)
		n, i := s.sems.slotOf(l.Resources[0])
		if n != name {
			return errCorrupt
		}
		s.sems.take(name, i)
	}
	for range d.count(2) {
		key, limit := d.str(), decodeLimit(d)
		w := s.leases.waiters.at(key)
		if d.err != nil {
			return nil
		}
		if w == nil {
			return errCorrupt
		}
		plain, ok := w.ask.(*Acquire) // a lock's until now: not a campaign, nor listed twice
		if !ok || len(w.Resources) != 1 || !s.sems.fits(w.Resources[0], limit) {
			return errCorrupt
		}
		c := &SemAcquire{Acquire: *plain, Limit: limit}
		w.ask, w.Acquire = c, &c.Acquire
		s.sems.join(w.Resources[0], limit)
	}
	return nil
}

// fits says whether name may be a semaphore of limit in a restored
// state: a limit in range, the same as the name's other users'.
func (ss *semState) fits(name string, limit int) bool {
	if limit < 1 || limit > leasehold.MaxSemaphoreLimit || name == "" {
		return false
	}
	sem := ss.byName.at(name)
	return sem == nil || sem.limit == limit
}
