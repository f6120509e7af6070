package fsm

import (
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// leaseFields is a lease as the state keeps it: leasehold.Lease with its
// display times as unix nanoseconds (8 bytes each instead of a
// time.Time's 24), and the fields most leases leave empty behind one
// pointer (rare). Every held lease carries it, so each byte here is
// 100 KB at 100,000 leases; view builds the leasehold.Lease that callers
// see.
type leaseFields struct {
	ID         uint64
	Token      uint64
	Resources  []string
	Owner      string // interned (names.go): shared by the owner's leases
	Operation  string // likewise
	TTL        time.Duration
	RenewCount uint64
	acquiredAt int64 // the leader's wall clock, for display only (0: none)
	renewedAt  int64
	rare       *leaseRare // nil while every field of it is zero
}

// leaseRare holds what a plain lock does not use: lock-delay, max hold,
// metadata, a progress note, a semaphore slot, an election's value.
type leaseRare struct {
	LockDelay  time.Duration
	MaxHold    time.Duration
	Metadata   map[string]string
	Progress   string
	progressAt int64
	Semaphore  string
	Limit      int
	election   bool   // the lease is an election's leadership (elections.go)
	value      []byte // the leader's value
}

var noRare leaseRare

// more is the lease's rare fields to read; all zero if it has none.
func (l *leaseFields) more() *leaseRare {
	if l.rare == nil {
		return &noRare
	}
	return l.rare
}

// setMore is the lease's rare fields to write, made on first use.
func (l *leaseFields) setMore() *leaseRare {
	if l.rare == nil {
		l.rare = new(leaseRare)
	}
	return l.rare
}

// rareOf is a copy of r if it holds something, else nil: a plain lock
// allocates nothing for it.
func rareOf(r *leaseRare) *leaseRare {
	if r.LockDelay == 0 && r.MaxHold == 0 && r.Metadata == nil && r.Progress == "" && r.progressAt == 0 &&
		r.Semaphore == "" && r.Limit == 0 && !r.election && r.value == nil {
		return nil
	}
	c := *r
	return &c
}

func (l *leaseFields) LockDelay() time.Duration { return l.more().LockDelay }
func (l *leaseFields) MaxHold() time.Duration   { return l.more().MaxHold }
func (l *leaseFields) Semaphore() string        { return l.more().Semaphore }
func (l *leaseFields) Limit() int               { return l.more().Limit }
func (l *leaseFields) election() bool           { return l.more().election }

func (l *leaseFields) view() leasehold.Lease {
	m := l.more()
	return leasehold.Lease{
		ID: l.ID, Token: l.Token, Resources: l.Resources, Owner: l.Owner, Operation: l.Operation,
		TTL: l.TTL, LockDelay: m.LockDelay, MaxHold: m.MaxHold, Metadata: m.Metadata,
		AcquiredAt: nanosTime(l.acquiredAt), RenewedAt: nanosTime(l.renewedAt),
		RenewCount: l.RenewCount, Progress: m.Progress, ProgressAt: nanosTime(m.progressAt),
		Semaphore: m.Semaphore, Limit: m.Limit,
	}
}

func fieldsOf(l *leasehold.Lease) leaseFields {
	return leaseFields{
		ID: l.ID, Token: l.Token, Resources: l.Resources, Owner: l.Owner, Operation: l.Operation,
		TTL: l.TTL, acquiredAt: timeNanos(l.AcquiredAt), renewedAt: timeNanos(l.RenewedAt), RenewCount: l.RenewCount,
		rare: rareOf(&leaseRare{LockDelay: l.LockDelay, MaxHold: l.MaxHold, Metadata: l.Metadata,
			Progress: l.Progress, progressAt: timeNanos(l.ProgressAt), Semaphore: l.Semaphore, Limit: l.Limit}),
	}
}
