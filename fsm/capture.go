package fsm

import (
	"io"
	"maps"
	"slices"
	"sync/atomic"
)

// A capture is the state at one applied index, taken in O(1) and encoded
// later, off the apply path (raft calls Snapshot on its apply goroutine and
// Persist on another). Capture freezes the state's maps (cowMap: each
// sub-state freezes its own, part.captureInto): until the capture is
// released, Apply writes around them, and the capture reads them as they
// were. Everything else a snapshot reads is a scalar copied at capture,
// or a slice that Apply only appends to or replaces (the audit log, the
// dedup window's order: see dedup.drop).
type capture struct {
	view     *State // the frozen maps and the counters, for the section writers
	released atomic.Bool
	// frozen: the state's maps are frozen for this capture (or a later
	// one), until thaw sees every capture released.
	frozen bool
	// applies counts the Applies while frozen; budget is what each Apply
	// folds back after (thawBudget).
	applies, budget int
}

// Capture takes the state as it is now, for WriteTo; it costs the same
// whatever the state's size. The caller serialises it with Apply, and
// must call Release when done with it.
func (s *State) Capture() *Snapshot {
	s.thaw()
	v := &State{cfg: s.cfg, lastIndex: s.lastIndex, lastToken: s.lastToken, dedup: s.dedup.freeze(),
		audit: s.audit[:len(s.audit):len(s.audit)]}
	for _, p := range s.parts() {
		p.captureInto(v)
	}
	c := &capture{view: v, frozen: true}
	s.snaps.capture = c
	s.snaps.out.Add(1)
	s.dedup.shared = true
	return &Snapshot{c: c, size: &s.snaps.size, out: &s.snaps.out}
}

// thaw, at the start of each Apply and Capture, unfreezes the maps once
// every capture is released (a capture taken while another was out has
// maps of its own (freeze), but values shared with the older one), and
// then folds a few entries of what Apply wrote around the captures back
// into them (cowMap.thawStep): an Apply after a long Persist costs a few
// microseconds more, not the overlay's size.
func (s *State) thaw() {
	c := s.snaps.capture
	if c == nil || s.snaps.out.Load() > 0 {
		if c != nil {
			c.applies++
		}
		return
	}
	if c.frozen {
		c.frozen = false
		s.dedup.shared = false
		written := 0
		for _, m := range s.snaps.maps {
			m.unfreeze()
			written += m.overlay()
		}
		c.budget = thawBudget(written, c.applies)
	}
	budget := c.budget
	for _, m := range s.snaps.maps {
		budget -= m.thawStep(budget)
	}
	if budget > 0 { // every overlay is folded
		s.snaps.capture = nil
	}
}

// thawBudget is how many overlay entries each Apply folds back after a
// capture is released, when applies Applies wrote written entries around
// it: twice what an Apply wrote, so the fold ends in half as many Applies
// as made it, and an Apply costs about what it cost while the capture
// was out (an entry folded is a map write and a delete, as an entry
// written was). At least 16, so a few large Applies do not leave a long
// fold; at most 4096, so one that wrote a whole map does not fold it in
// one. (A capture taken before the fold ends folds the rest first.)
func thawBudget(written, applies int) int {
	return min(max(16, 2*written/max(applies, 1)), 4096)
}

// cowMapper is a cowMap of any type, as capture and thaw see it.
type cowMapper interface {
	unfreeze()
	overlay() int
	thawStep(budget int) int
}

// Snapshot is a captured state (State.Capture). WriteTo may run on any
// goroutine, alongside Apply; it may be called more than once.
type Snapshot struct {
	c    *capture
	size *atomic.Int64
	out  *atomic.Int32 // the state's captures not yet released
}

// WriteTo writes the snapshot's encoding to w, as Snapshot encodes, in
// slices of about 64 KiB.
func (sn *Snapshot) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	err := sn.c.view.WriteSnapshot(cw)
	if err == nil {
		sn.size.Store(cw.n)
	}
	return cw.n, err
}

// Release says the snapshot is no longer read: the state's next Apply
// folds its writes back into its maps.
func (sn *Snapshot) Release() {
	if !sn.c.released.Swap(true) {
		sn.out.Add(-1)
	}
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (cw *countingWriter) Write(b []byte) (int, error) {
	n, err := cw.w.Write(b)
	cw.n += int64(n)
	return n, err
}

// cloneValue is the copy a frozen map makes of a value about to change in
// place: it copies what Apply changes in place, and shares the rest. A
// plain value is copied as it is.
func cloneValue[V any](v V) V {
	var c any
	switch x := any(v).(type) {
	case *lease:
		c = cloneLease(x)
	case *waiter:
		c = cloneWaiter(x)
	case *idemRecord:
		c = cloneIdem(x)
	case *semaphore:
		c = cloneSem(x)
	case *group:
		c = cloneGroup(x)
	case *queue:
		c = cloneQueue(x)
	case *barrier:
		c = x.clone()
	default:
		return v
	}
	return c.(V)
}

func cloneLease(l *lease) *lease {
	c := *l
	if l.rare != nil {
		r := *l.rare
		c.rare = &r
	}
	return &c
}

// cloneWaiter copies the waiter's ask too: a retry changes its attempt.
func cloneWaiter(w *waiter) *waiter {
	c := *w
	c.ask = w.ask.clone()
	c.Acquire = c.ask.Base()
	return &c
}

func cloneIdem(r *idemRecord) *idemRecord {
	c := *r
	return &c
}

func cloneSem(sem *semaphore) *semaphore {
	c := *sem
	c.taken = slices.Clone(sem.taken)
	return &c
}

func cloneGroup(g *group) *group {
	c := *g
	c.parts = slices.Clone(g.parts)
	c.members = maps.Clone(g.members)
	return &c
}

// cloneQueue copies a queue whole: its keys and messages point at each
// other and its heap at its keys, so a copy of part would not do. It
// costs the queue's size, once per capture, for a queue written while a
// snapshot is persisted.
func cloneQueue(q *queue) *queue {
	c := *q
	c.keys = make(map[string]*qkey, len(q.keys))
	msgs := make(map[*qmsg]*qmsg, len(q.inflight))
	for name, k := range q.keys {
		ck := &qkey{name: k.name, blocked: k.blocked, hix: k.hix, msgs: make([]*qmsg, len(k.msgs))}
		for i, m := range k.msgs {
			cm := *m
			cm.key = ck
			ck.msgs[i] = &cm
			if m.token != 0 {
				msgs[m] = &cm
			}
		}
		c.keys[name] = ck
	}
	c.ready = make(readyHeap, len(q.ready))
	for i, k := range q.ready {
		c.ready[i] = c.keys[k.name]
	}
	c.inflight = make(map[uint64]*qmsg, len(q.inflight))
	for seq, m := range q.inflight {
		c.inflight[seq] = msgs[m]
	}
	c.consumers = maps.Clone(q.consumers)
	c.dead = slices.Clone(q.dead)
	c.dedupIDs = maps.Clone(q.dedupIDs)
	c.dedupLog = slices.Clone(q.dedupLog)
	c.requests = maps.Clone(q.requests)
	c.receipts = make(map[string][]uint64, len(q.receipts))
	for r, seqs := range q.receipts {
		c.receipts[r] = slices.Clone(seqs)
	}
	c.receiptOf = maps.Clone(q.receiptOf)
	return &c
}
