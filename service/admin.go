package service

import (
	"context"
	"math"
	"strings"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
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
	Waiters      []leasehold.Waiter
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

// ForceReleaseRequest releases the lease holding Resource, if it is still
// LeaseID, on an operator's word: the caller is the actor the audit log
// keeps, with Reason.
type ForceReleaseRequest struct {
	Resource  string
	LeaseID   uint64
	Reason    string
	RequestID string
}

// ForceRelease releases a lease on an operator's word (audited).
func (s *Service) ForceRelease(ctx context.Context, req *ForceReleaseRequest) (Grant, error) {
	return answer(s.node.Propose(ctx, &fsm.ForceRelease{RequestID: req.RequestID, Resource: req.Resource,
		LeaseID: req.LeaseID, Actor: CallerOf(ctx).Actor, Reason: req.Reason}))
}

// Audit reads the last limit audit records made within since (0: ever),
// oldest first; truncated says older ones were left out.
func (s *Service) Audit(ctx context.Context, since time.Duration, limit int) (recs []leasehold.AuditRecord, truncated bool, err error) {
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
type Backup struct {
	Index     uint64 // the last log index applied
	Term      uint64 // the raft term when it was taken
	LastToken uint64 // the largest fencing token in it
	State     []byte // the state's snapshot encoding
}

// Backup reads this node's state for a backup (cluster.Node.Backup).
func (s *Service) Backup() Backup {
	b := s.node.Backup()
	return Backup{Index: b.Index, Term: b.Term, LastToken: b.LastToken, State: b.State}
}
