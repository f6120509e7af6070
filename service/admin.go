package service

import (
	"context"
	"math"
	"strings"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/fsm"
)

// Lock is a resource as an operator sees it: its holder (nil: free) with
// the age and countdown of the leader's timers, and its line.
type Lock struct {
	Resource string
	Holder   *leasehold.Lease
	HeldFor  time.Duration // the holder's age on the leader
	// ExpiresIn is what is left of the holder's lease; ExpiresKnown says
	// this node knows it.
	ExpiresIn    time.Duration
	ExpiresKnown bool
	Waiters      []Waiter
	LockDelay    time.Duration // left of the lock delay; 0: none
}

// Lock reads one resource, held or not, with its line and lock delay.
func (s *Service) Lock(ctx context.Context, resource string) (Lock, error) {
	var out Lock
	err := s.node.Read(ctx, func(st *fsm.State) {
		var holder *leasehold.Lease
		if l, ok := st.Holder(resource); ok {
			holder = &l
		}
		out = s.lock(st, resource, holder)
		out.LockDelay, _ = st.LockDelay(resource)
	})
	return out, err
}

// Locks reads the resources held by up to limit leases after the lease ID
// after, of those starting with prefix; more says a next page has some,
// and next is the lease ID to continue after.
func (s *Service) Locks(ctx context.Context, after uint64, limit int, prefix string) (locks []Lock, next uint64, err error) {
	err = s.node.Read(ctx, func(st *fsm.State) {
		ls := st.Leases(after, limit+1, prefix)
		if len(ls) > limit {
			ls = ls[:limit]
			next = ls[limit-1].ID
		}
		for i := range ls {
			for _, r := range ls[i].Resources {
				if strings.HasPrefix(r, prefix) {
					locks = append(locks, s.lock(st, r, &ls[i]))
				}
			}
		}
	})
	return locks, next, err
}

// lock runs inside node.Read, on the leader: the countdown and age come
// from the leader's timers.
func (s *Service) lock(st *fsm.State, resource string, l *leasehold.Lease) Lock {
	out := Lock{Resource: resource, Holder: l, Waiters: st.Waiters(resource)}
	if l != nil && l.Semaphore != "" {
		out.Waiters = st.Waiters(l.Semaphore) // a semaphore's waiters wait for any of its slots
	}
	if l != nil {
		out.HeldFor = s.node.LeaseAge(l.ID)
		out.ExpiresIn, out.ExpiresKnown = s.node.ExpiresIn(l.ID)
	}
	return out
}

// ForceRelease releases a lease on an operator's word (audited).
func (s *Service) ForceRelease(ctx context.Context, cmd *fsm.ForceRelease) (fsm.Result, error) {
	res, err := s.node.Propose(ctx, cmd)
	if err == nil {
		err = res.Err
	}
	return res, err
}

// AuditRecord is one entry of the audit log.
type AuditRecord = fsm.AuditRecord

// Audit reads the last limit audit records made within since (0: ever),
// oldest first; truncated says older ones were left out.
func (s *Service) Audit(ctx context.Context, since time.Duration, limit int) (recs []AuditRecord, truncated bool, err error) {
	err = s.node.Read(ctx, func(st *fsm.State) {
		var from time.Time
		if since > 0 {
			from = time.Now().Add(-since)
		}
		recs = st.Audit(from, math.MaxInt)
		if len(recs) > limit {
			truncated, recs = true, recs[len(recs)-limit:]
		}
	})
	return recs, truncated, err
}

// Backup is a node's state for a backup, at one applied index.
type Backup = cluster.Backup

// Backup reads this node's state for a backup (cluster.Node.Backup).
func (s *Service) Backup() Backup { return s.node.Backup() }
