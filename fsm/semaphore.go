package fsm

import (
	"math"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/api/leasehold"
)

// Semaphores: an acquire with a Limit N on the one resource R asks for one
// of N slots, named R#1 .. R#N (leasehold.SlotName). A grant takes the
// lowest free slot as its lease's one resource, so the slot, not R, is
// held, renewed, expired, force-released and fenced like any lock's
// resource; its tokens strictly increase because every token does. R
// itself is never held: waiters queue on R in arrival order (the same
// waiters as locks), and a slot that frees wakes R's queue.
//
// A name is a semaphore of one limit while anyone holds or awaits one of
// its slots. A lock (or campaign) on R or on one of its slot names, a
// semaphore acquire of a name held or awaited as a lock, one with another
// limit, and one whose name is another semaphore's slot (or whose slots
// are other semaphores: names never nest) are refused with CodeConflict.

// KindSemAcquire is an Acquire with a Limit, as the log carries it.
const KindSemAcquire Kind = 60

// SemAcquire is how a semaphore acquire (Acquire with Limit > 0) is
// decoded from the log: an Acquire's encoding followed by the limit.
// Acquire.Kind names this kind for such an acquire, so the service
// proposes a plain *Acquire.
type SemAcquire struct {
	Acquire
}

func (*SemAcquire) Kind() Kind { return KindSemAcquire }

func (c *SemAcquire) apply(s *State, ix uint64, now int64) Result {
	return s.acquire(ix, now, &c.Acquire)
}

func (c *SemAcquire) encode(e *encoder) {
	c.Acquire.encodeBody(e)
	e.uvarint(uint64(c.Limit))
}

func (c *SemAcquire) decode(d *decoder) {
	c.Acquire.decode(d)
	c.Limit = decodeLimit(d)
}

// decodeLimit reads a limit; one too large to be an int is kept out of
// range, so validation refuses it alike on every node.
func decodeLimit(d *decoder) int {
	return int(min(d.uvarint(), math.MaxInt32))
}

// semaphore is a name in use as a semaphore: its limit, how many leases
// hold or waiters await one of its slots (it is forgotten at 0), and
// which slots are held (taken[i-1] for slot i), so that finding a free
// slot looks up no names.
type semaphore struct {
	limit int
	users int
	held  int
	taken []bool
}

// validateSemaphore adds a semaphore acquire's own rules to an acquire's.
func validateSemaphore(c *Acquire) error {
	if c.Limit == 0 {
		return nil
	}
	if c.Limit < 0 || c.Limit > leasehold.MaxSemaphoreLimit {
		return leasehold.Errorf(leasehold.CodeInvalid, "limit is %d; a semaphore has 1 to %d slots", c.Limit, leasehold.MaxSemaphoreLimit)
	}
	if len(c.Resources) != 1 {
		return leasehold.Errorf(leasehold.CodeInvalid,
			"a semaphore acquire (limit %d) names one semaphore, not %d resources; acquire the others separately", c.Limit, len(c.Resources))
	}
	if c.Election {
		return leasehold.Errorf(leasehold.CodeInvalid, "an election cannot have a limit")
	}
	return nil
}

// semConflict refuses mixing kinds on one name: see the comment above.
func (s *State) semConflict(c *Acquire) error {
	if c.Limit == 0 {
		for _, r := range c.Resources {
			if sem, ok := s.sems.get(r); ok {
				return leasehold.Errorf(leasehold.CodeConflict,
					"%q is a semaphore with limit %d: acquire it with that limit, or choose another name", r, sem.limit)
			}
			if name, _ := s.slotOf(r); name != "" {
				return leasehold.Errorf(leasehold.CodeConflict,
					"%q is a slot of the semaphore %q: acquire the semaphore, or choose another name", r, name)
			}
		}
		return nil
	}
	name := c.Resources[0]
	if sem, ok := s.sems.get(name); ok {
		if sem.limit != c.Limit {
			return leasehold.Errorf(leasehold.CodeConflict,
				"semaphore %q has limit %d, not %d: every holder must ask for the same limit", name, sem.limit, c.Limit)
		}
		return nil
	}
	if _, held := s.holders.get(name); held || len(s.queues[name]) > 0 {
		return leasehold.Errorf(leasehold.CodeConflict,
			"%q is held or awaited as a lock, so it cannot be a semaphore; choose another name", name)
	}
	if sem, _ := s.slotOf(name); sem != "" {
		return leasehold.Errorf(leasehold.CodeConflict,
			"%q is a slot of the semaphore %q, so it cannot be a semaphore too; choose another name", name, sem)
	}
	b := append(append(s.scratch.b[:0], name...), '#') // no allocation per slot
	n := len(b)
	defer func() { s.scratch.b = b[:0] }()
	for i := 1; i <= c.Limit; i++ {
		b = strconv.AppendInt(b[:n], int64(i), 10)
		if _, held := s.holders.get(string(b)); held || len(s.queues[string(b)]) > 0 {
			return leasehold.Errorf(leasehold.CodeConflict,
				"%q, slot %d of semaphore %q, is held or awaited as a lock; choose another name", string(b), i, name)
		}
		if _, nested := s.sems.get(string(b)); nested {
			return leasehold.Errorf(leasehold.CodeConflict,
				"%q, slot %d of semaphore %q, is a semaphore itself; choose another name", string(b), i, name)
		}
	}
	return nil
}

// slotOf returns the semaphore in use and slot number that resource names,
// or "" if it names none.
func (s *State) slotOf(resource string) (string, int) {
	i := strings.LastIndexByte(resource, '#')
	if i < 0 {
		return "", 0
	}
	sem, ok := s.sems.get(resource[:i])
	if !ok {
		return "", 0
	}
	n, err := strconv.Atoi(resource[i+1:])
	if err != nil || n < 1 || n > sem.limit || leasehold.SlotName(resource[:i], n) != resource {
		return "", 0
	}
	return resource[:i], n
}

// freeSlot is the lowest slot of the semaphore that nobody holds and that
// is out of lock-delay, or 0 if there is none. The slot names are built in
// the scratch buffer, so a scan of many slots allocates nothing.
//
// A semaphore in use knows its held slots (no other lease can hold one:
// semConflict), so only lock-delays are looked up by name; a new one looks
// up each slot's name.
func (s *State) freeSlot(name string, limit int) int {
	sem := s.sems.at(name)
	if sem != nil && sem.held >= limit {
		return 0
	}
	b := append(append(s.scratch.b[:0], name...), '#')
	n := len(b)
	defer func() { s.scratch.b = b[:0] }()
	for i := 1; i <= limit; i++ {
		if sem != nil && sem.taken[i-1] {
			continue
		}
		if sem == nil || s.blocks.len() > 0 {
			b = strconv.AppendInt(b[:n], int64(i), 10)
			if _, held := s.holders.get(string(b)); held && sem == nil {
				continue
			}
			if _, blocked := s.blocks.get(string(b)); blocked {
				continue
			}
		}
		return i
	}
	return 0
}

// semBlocker is blocker for a semaphore acquire (w nil: a new request).
func (s *State) semBlocker(name string, limit int, w *waiter) error {
	if q := s.queues[name]; len(q) > 0 && q[0] != w {
		return leasehold.Errorf(leasehold.CodeHeld,
			"semaphore %q has %d waiter(s) queued ahead of this request", name, len(q))
	}
	if s.freeSlot(name, limit) == 0 {
		return leasehold.Errorf(leasehold.CodeHeld,
			"semaphore %q has all %d slots held (or in lock-delay)", name, limit)
	}
	return nil
}

// semJoin and semLeave count a lease or waiter of the semaphore in or
// out.
func (s *State) semJoin(name string, limit int) {
	sem, _ := s.sems.mut(name)
	if sem == nil {
		sem = &semaphore{limit: limit, taken: make([]bool, limit)}
		s.sems.set(name, sem)
	}
	sem.users++
}

// semTake marks slot i (1..limit) of a joined semaphore held; semFree
// counts the holder l out of its slot and the semaphore.
func (s *State) semTake(name string, i int) {
	sem, _ := s.sems.mut(name)
	sem.taken[i-1] = true
	sem.held++
}

func (s *State) semFree(l *lease) {
	sem, _ := s.sems.mut(l.Semaphore())
	if sem == nil {
		return
	}
	if _, i := s.slotOf(l.Resources[0]); i > 0 {
		sem.taken[i-1] = false
	}
	sem.held--
	s.semLeave(l.Semaphore())
}

func (s *State) semLeave(name string) {
	if sem, _ := s.sems.mut(name); sem != nil {
		if sem.users--; sem.users <= 0 {
			s.sems.del(name)
		}
	}
}

// wakeName is the queue to look at when resource r frees: a slot's
// waiters wait on its semaphore's name.
func (s *State) wakeName(r string) string {
	if name, _ := s.slotOf(r); name != "" {
		return name
	}
	return r
}

// Semaphore returns the limit of name if it is a semaphore in use, with
// the leases holding its slots in slot order.
func (s *State) Semaphore(name string) (limit int, slots []leasehold.Lease, ok bool) {
	sem := s.sems.at(name)
	if sem == nil {
		return 0, nil, false
	}
	for i, taken := range sem.taken {
		if !taken {
			continue
		}
		if l, held := s.Holder(leasehold.SlotName(name, i+1)); held {
			slots = append(slots, l)
		}
	}
	return sem.limit, slots, true
}
