package fsm

import (
	"sort"
	"strings"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// Waiter is what an operator may see of a queued acquire (the
// vocabulary's: leasehold/leases.go).
type Waiter = leasehold.Waiter

// Lease returns the lease with this id.
func (s *State) Lease(id uint64) (leasehold.Lease, bool) {
	l := s.leases.byID.at(id)
	if l == nil {
		return leasehold.Lease{}, false
	}
	return l.view(), true
}

// Holder returns the lease that holds resource, if any.
func (s *State) Holder(resource string) (leasehold.Lease, bool) {
	id, ok := s.leases.holders.get(resource)
	if !ok {
		return leasehold.Lease{}, false
	}
	return s.Lease(id)
}

// HeldFor is the age of a lease as last stamped by a leader.
func (s *State) HeldFor(id uint64) time.Duration {
	if l := s.leases.byID.at(id); l != nil {
		return l.heldFor
	}
	return 0
}

// Queued reports whether the acquire with this key (Acquire.Key) waits in
// line, with the attempt that owns its place and its secret's hash.
func (s *State) Queued(key string) (attempt string, secretHash [32]byte, ok bool) {
	w := s.leases.waiters.at(key)
	if w == nil || key == "" {
		return "", [32]byte{}, false
	}
	return w.Attempt, w.SecretHash, true
}

// Contended reports whether an acquire of resources would have to wait
// now: one is held, in lock-delay or wanted by a waiter.
func (s *State) Contended(resources []string) bool { return s.leases.blocker(resources, nil) != nil }

// GrantOf returns the grant the acquire with this key got, if its lease
// still holds: the answer a retry would get (Dup set) and the attempt that
// owns the grant. A caller that queued in one request and waits in the
// next is answered from it when the grant landed in between, without a
// log entry.
func (s *State) GrantOf(key string) (r Result, attempt string, ok bool) {
	rec := s.dedup.recs.at(key)
	if key == "" || rec == nil || rec.kind != KindAcquire || rec.leaseID == 0 {
		return Result{}, "", false
	}
	l := s.leases.byID.at(rec.leaseID)
	if l == nil || l.key != key {
		return Result{}, "", false
	}
	view := l.view()
	return Result{Lease: &view, Remaining: rec.answer().Remaining, Dup: true}, l.attempt, true
}

// Waiters lists the waiters for resource in the order they will be served.
func (s *State) Waiters(resource string) []Waiter {
	q := s.leases.lines[resource]
	out := make([]Waiter, len(q))
	for i, w := range q {
		out[i] = Waiter{
			RequestID: w.RequestID, Resources: w.Resources, Owner: w.Owner, Operation: w.Operation,
			Wait: w.Wait, QueuedAt: time.Unix(0, w.queuedAt).UTC(), Position: i,
		}
	}
	return out
}

// LockDelay reports whether resource is in a lock-delay, and how long the
// delay is (its countdown runs on the leader).
func (s *State) LockDelay(resource string) (time.Duration, bool) {
	b, ok := s.leases.blocks.get(resource)
	return b.delay, ok
}

// Leases returns up to limit leases with id > after, in id order, that
// hold a resource starting with prefix.
func (s *State) Leases(after uint64, limit int, prefix string) []leasehold.Lease {
	ids := make([]uint64, 0, s.leases.byID.len())
	for id, l := range s.leases.byID.all() {
		if id > after && hasPrefix(l.Resources, prefix) {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	if limit < 0 {
		limit = 0
	}
	if len(ids) > limit {
		ids = ids[:limit]
	}
	out := make([]leasehold.Lease, len(ids))
	for i, id := range ids {
		out[i] = s.leases.byID.at(id).view()
	}
	return out
}

func hasPrefix(rs []string, prefix string) bool {
	if prefix == "" {
		return true
	}
	for _, r := range rs {
		if strings.HasPrefix(r, prefix) {
			return true
		}
	}
	return false
}

// Counts are gauges for metrics.
type Counts struct {
	Leases, Waiters, Blocked, Dedup int
	IdemKeys, IdemBytes             int // idempotency keys in use and bytes of stored results (idem.go)
}

func (s *State) Counts() Counts {
	return Counts{Leases: s.leases.byID.len(), Waiters: s.leases.waiters.len(), Blocked: s.leases.blocks.len(), Dedup: s.dedup.len(),
		IdemKeys: s.idem.records.len(), IdemBytes: s.idem.bytes}
}

// EachLease visits every lease (in no particular order) with its recorded
// age; a new leader restarts its countdowns from these.
func (s *State) EachLease(f func(l *leasehold.Lease, heldFor time.Duration)) {
	for _, l := range s.leases.byID.all() {
		view := l.view()
		f(&view, l.heldFor)
	}
}
