package fsm

import (
	"math"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/api/leasehold"
)

// Semaphores: a SemAcquire with a Limit N on the one resource R asks for one
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

// KindSemAcquire is a SemAcquire: an Acquire's body followed by the limit.
const KindSemAcquire Kind = 60

// SemAcquire asks for one of Limit slots of the one semaphore
// Resources[0]. It is an Acquire in every other way; its lease holds the
// slot. (One decoded with limit 0, which no node proposes, is a lock's
// acquire, as it always was.)
type SemAcquire struct {
	Acquire
	Limit int
}

func (*SemAcquire) Kind() Kind { return KindSemAcquire }

func (c *SemAcquire) apply(s *State, ix uint64, now int64) Result {
	if c.Limit == 0 {
		return s.leases.acquire(ix, now, &c.Acquire)
	}
	return s.leases.acquire(ix, now, c)
}

func (c *SemAcquire) encode(e *encoder) {
	c.Acquire.encodeBody(e)
	e.uvarint(uint64(c.Limit))
}

func (c *SemAcquire) decode(d *decoder) {
	c.Acquire.decode(d)
	c.Limit = decodeLimit(d)
}

// A semaphore's ask: one free slot of the name, in arrival order.

func (c *SemAcquire) sum(e *encoder) fingerprint {
	if !e.startSum(c.legacy, c.RequestID) {
		return fingerprint{}
	}
	c.encodeAsk(e)
	e.uvarint(uint64(c.Limit))
	return sumOf(e)
}

func (c *SemAcquire) check() error {
	if c.Limit < 0 || c.Limit > leasehold.MaxSemaphoreLimit {
		return leasehold.Errorf(leasehold.CodeInvalid, "limit is %d; a semaphore has 1 to %d slots", c.Limit, leasehold.MaxSemaphoreLimit)
	}
	if len(c.Resources) != 1 {
		return leasehold.Errorf(leasehold.CodeInvalid,
			"a semaphore acquire (limit %d) names one semaphore, not %d resources; acquire the others separately", c.Limit, len(c.Resources))
	}
	return nil
}

func (c *SemAcquire) conflict(ls *leaseState) error {
	if err := ls.st.sems.semConflict(c.Resources[0], c.Limit); err != nil {
		return err
	}
	return ls.st.elections.conflict(c.Resources, false)
}

func (c *SemAcquire) blocker(ls *leaseState, w *waiter) error {
	return ls.st.sems.blocker(c.Resources[0], c.Limit, w)
}

func (c *SemAcquire) take(ls *leaseState, rare leaseRare) ([]string, leaseRare) {
	ss, name := &ls.st.sems, c.Resources[0]
	i := ss.freeSlot(name, c.Limit)
	ss.join(name, c.Limit)
	ss.take(name, i)
	rare.Semaphore, rare.Limit = name, c.Limit
	return []string{leasehold.SlotName(name, i)}, rare
}

func (c *SemAcquire) joined(ls *leaseState) { ls.st.sems.join(c.Resources[0], c.Limit) }
func (c *SemAcquire) left(ls *leaseState)   { ls.st.sems.leave(c.Resources[0]) }
func (*SemAcquire) next() bool              { return true }

func (c *SemAcquire) clone() Ask {
	d := *c
	return &d
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

// The semaphore sub-state: the names in use as semaphores. A slot is
// held as a lease's one resource (the lease sub-state's), and waiters
// queue in its lines on the semaphore's name.
type semState struct {
	st     *State
	byName cowMap[string, *semaphore]
}

func (ss *semState) init(s *State) {
	*ss = semState{st: s, byName: newCowMap[string, *semaphore]()}
	s.track(&ss.byName)
}

func (ss *semState) captureInto(v *State)       { v.sems = semState{st: v, byName: ss.byName.freeze()} }
func (*semState) eachCountdown(func(Countdown)) {}

// leaseEnded counts the holder l out of its slot and the semaphore.
func (ss *semState) leaseEnded(l *lease) {
	if l.Semaphore() == "" {
		return
	}
	sem, _ := ss.byName.mut(l.Semaphore())
	if sem == nil {
		return
	}
	if _, i := ss.slotOf(l.Resources[0]); i > 0 {
		sem.taken[i-1] = false
	}
	sem.held--
	ss.leave(l.Semaphore())
}

// lockConflict refuses a lock or campaign on a semaphore's name or slot.
func (ss *semState) lockConflict(resources []string) error {
	for _, r := range resources {
		if sem, ok := ss.byName.get(r); ok {
			return leasehold.Errorf(leasehold.CodeConflict,
				"%q is a semaphore with limit %d: acquire it with that limit, or choose another name", r, sem.limit)
		}
		if name, _ := ss.slotOf(r); name != "" {
			return leasehold.Errorf(leasehold.CodeConflict,
				"%q is a slot of the semaphore %q: acquire the semaphore, or choose another name", r, name)
		}
	}
	return nil
}

// semConflict refuses a semaphore acquire of name with limit that mixes
// kinds on one name: see the comment above.
func (ss *semState) semConflict(name string, limit int) error {
	ls := &ss.st.leases
	if sem, ok := ss.byName.get(name); ok {
		if sem.limit != limit {
			return leasehold.Errorf(leasehold.CodeConflict,
				"semaphore %q has limit %d, not %d: every holder must ask for the same limit", name, sem.limit, limit)
		}
		return nil
	}
	if _, held := ls.holders.get(name); held || len(ls.lines[name]) > 0 {
		return leasehold.Errorf(leasehold.CodeConflict,
			"%q is held or awaited as a lock, so it cannot be a semaphore; choose another name", name)
	}
	if sem, _ := ss.slotOf(name); sem != "" {
		return leasehold.Errorf(leasehold.CodeConflict,
			"%q is a slot of the semaphore %q, so it cannot be a semaphore too; choose another name", name, sem)
	}
	scratch := &ss.st.scratch
	b := append(append(scratch.b[:0], name...), '#') // no allocation per slot
	n := len(b)
	defer func() { scratch.b = b[:0] }()
	for i := 1; i <= limit; i++ {
		b = strconv.AppendInt(b[:n], int64(i), 10)
		if _, held := ls.holders.get(string(b)); held || len(ls.lines[string(b)]) > 0 {
			return leasehold.Errorf(leasehold.CodeConflict,
				"%q, slot %d of semaphore %q, is held or awaited as a lock; choose another name", string(b), i, name)
		}
		if _, nested := ss.byName.get(string(b)); nested {
			return leasehold.Errorf(leasehold.CodeConflict,
				"%q, slot %d of semaphore %q, is a semaphore itself; choose another name", string(b), i, name)
		}
	}
	return nil
}

// slotOf returns the semaphore in use and slot number that resource names,
// or "" if it names none.
func (ss *semState) slotOf(resource string) (string, int) {
	i := strings.LastIndexByte(resource, '#')
	if i < 0 {
		return "", 0
	}
	sem, ok := ss.byName.get(resource[:i])
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
func (ss *semState) freeSlot(name string, limit int) int {
	ls := &ss.st.leases
	sem := ss.byName.at(name)
	if sem != nil && sem.held >= limit {
		return 0
	}
	scratch := &ss.st.scratch
	b := append(append(scratch.b[:0], name...), '#')
	n := len(b)
	defer func() { scratch.b = b[:0] }()
	for i := 1; i <= limit; i++ {
		if sem != nil && sem.taken[i-1] {
			continue
		}
		if sem == nil || ls.blocks.len() > 0 {
			b = strconv.AppendInt(b[:n], int64(i), 10)
			if _, held := ls.holders.get(string(b)); held && sem == nil {
				continue
			}
			if _, blocked := ls.blocks.get(string(b)); blocked {
				continue
			}
		}
		return i
	}
	return 0
}

// blocker is Ask.blocker for a semaphore acquire (w nil: a new request).
func (ss *semState) blocker(name string, limit int, w *waiter) error {
	if q := ss.st.leases.lines[name]; len(q) > 0 && q[0] != w {
		return leasehold.Errorf(leasehold.CodeHeld,
			"semaphore %q has %d waiter(s) queued ahead of this request", name, len(q))
	}
	if ss.freeSlot(name, limit) == 0 {
		return leasehold.Errorf(leasehold.CodeHeld,
			"semaphore %q has all %d slots held (or in lock-delay)", name, limit)
	}
	return nil
}

// join and leave count a lease or waiter of the semaphore in or out.
func (ss *semState) join(name string, limit int) {
	sem, _ := ss.byName.mut(name)
	if sem == nil {
		sem = &semaphore{limit: limit, taken: make([]bool, limit)}
		ss.byName.set(name, sem)
	}
	sem.users++
}

// take marks slot i (1..limit) of a joined semaphore held.
func (ss *semState) take(name string, i int) {
	sem, _ := ss.byName.mut(name)
	sem.taken[i-1] = true
	sem.held++
}

func (ss *semState) leave(name string) {
	if sem, _ := ss.byName.mut(name); sem != nil {
		if sem.users--; sem.users <= 0 {
			ss.byName.del(name)
		}
	}
}

// wakeName is the queue to look at when resource r frees: a slot's
// waiters wait on its semaphore's name.
func (ss *semState) wakeName(r string) string {
	if name, _ := ss.slotOf(r); name != "" {
		return name
	}
	return r
}

// Semaphore returns the limit of name if it is a semaphore in use, with
// the leases holding its slots in slot order.
func (s *State) Semaphore(name string) (limit int, slots []leasehold.Lease, ok bool) {
	sem := s.sems.byName.at(name)
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
