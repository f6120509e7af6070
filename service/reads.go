package service

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fsm"
)

// Holding is what a resource looks like now.
type Holding struct {
	Holder *leasehold.Lease // nil: free
	// ExpiresIn is what is left of the holder's lease on the leader's
	// countdown, or -1 if this node does not know it.
	ExpiresIn time.Duration
	Waiters   []leasehold.Waiter // in line order
	LockDelay time.Duration      // left of the lock delay after the last holder; 0: none
	// Limit and Slots are set if the resource is a semaphore in use: its
	// limit and the holders of its slots, by slot.
	Limit int
	Slots []Held
}

// Holding reads the holder, the line and the lock delay of resource.
func (s *Service) Holding(ctx context.Context, resource string) (Holding, error) {
	var h Holding
	err := s.node.Read(ctx, func(st *fsm.State) {
		if l, ok := st.Holder(resource); ok {
			h.Holder, h.ExpiresIn = &l, s.expiresIn(l.ID)
		}
		h.Waiters = st.Waiters(resource)
		h.LockDelay, _ = st.LockDelay(resource)
		if limit, slots, ok := st.Semaphore(resource); ok {
			h.Limit = limit
			for _, l := range slots {
				h.Slots = append(h.Slots, Held{Lease: l, ExpiresIn: s.expiresIn(l.ID)})
			}
		}
	})
	return h, err
}

// Held is a lease and what is left of it (-1: unknown here).
type Held struct {
	Lease     leasehold.Lease
	ExpiresIn time.Duration
}

// List reads up to limit leases after the lease ID after whose resources
// start with prefix; more says a next page has some.
func (s *Service) List(ctx context.Context, after uint64, limit int, prefix string) (page []Held, more bool, err error) {
	err = s.node.Read(ctx, func(st *fsm.State) {
		ls := st.Leases(after, limit+1, prefix)
		if more = len(ls) > limit; more {
			ls = ls[:limit]
		}
		page = make([]Held, len(ls))
		for i := range ls {
			page[i] = Held{Lease: ls[i], ExpiresIn: s.expiresIn(ls[i].ID)}
		}
	})
	return page, more, err
}
