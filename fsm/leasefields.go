package fsm

import (
	"time"

	"github.com/leasehold/leasehold"
)

// leaseFields is a lease as the state keeps it: leasehold.Lease with its
// display times as unix nanoseconds, 8 bytes each instead of a
// time.Time's 24. Every held lease carries it, so that is 48 bytes a
// lease; view builds the leasehold.Lease that callers see.
type leaseFields struct {
	ID         uint64
	Token      uint64
	Resources  []string
	Owner      string
	Operation  string
	TTL        time.Duration
	LockDelay  time.Duration
	MaxHold    time.Duration
	Metadata   map[string]string
	RenewCount uint64
	Progress   string
	Semaphore  string
	Limit      int
	acquiredAt int64 // the leader's wall clock, for display only (0: none)
	renewedAt  int64
	progressAt int64
}

func (l *leaseFields) view() leasehold.Lease {
	return leasehold.Lease{
		ID: l.ID, Token: l.Token, Resources: l.Resources, Owner: l.Owner, Operation: l.Operation,
		TTL: l.TTL, LockDelay: l.LockDelay, MaxHold: l.MaxHold, Metadata: l.Metadata,
		AcquiredAt: nanosTime(l.acquiredAt), RenewedAt: nanosTime(l.renewedAt),
		RenewCount: l.RenewCount, Progress: l.Progress, ProgressAt: nanosTime(l.progressAt),
		Semaphore: l.Semaphore, Limit: l.Limit,
	}
}

func fieldsOf(l *leasehold.Lease) leaseFields {
	return leaseFields{
		ID: l.ID, Token: l.Token, Resources: l.Resources, Owner: l.Owner, Operation: l.Operation,
		TTL: l.TTL, LockDelay: l.LockDelay, MaxHold: l.MaxHold, Metadata: l.Metadata,
		acquiredAt: timeNanos(l.AcquiredAt), renewedAt: timeNanos(l.RenewedAt),
		RenewCount: l.RenewCount, Progress: l.Progress, progressAt: timeNanos(l.ProgressAt),
		Semaphore: l.Semaphore, Limit: l.Limit,
	}
}
