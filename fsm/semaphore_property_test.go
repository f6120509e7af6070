package fsm

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/leasehold/leasehold"
)

// semWatch is an Observer that records grants and ended waits in order.
type semWatch struct {
	nopObserver
	granted []string // keys of grants, in order
	ended   []string // keys of waits that ended without a grant
}

func (w *semWatch) Granted(_ *leasehold.Lease, key string) { w.granted = append(w.granted, key) }
func (w *semWatch) WaitEnded(key string, r Result) {
	if r.Lease == nil {
		w.ended = append(w.ended, key)
	}
}

// Random acquires (waiting or not), releases, expiries with and without
// lock-delay, unblocks, wait timeouts, cancellations and snapshot restores
// on one semaphore never give more than its limit holders, never two on a
// slot, serve waiters in arrival order, leave no waiter behind a free
// slot, strictly increase each slot's tokens, and restore to an equal
// state.
func TestSemaphoreProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.IntRange(1, 3).Draw(rt, "limit")
		obs := &semWatch{}
		s := New(DefaultConfig(), obs)
		var queue []string               // model: waiting keys in arrival order
		lastToken := map[string]uint64{} // slot -> last token granted on it
		ix, n := uint64(0), 0
		var held []*leasehold.Lease
		for step := range rapid.IntRange(1, 60).Draw(rt, "steps") {
			ix++
			var c Command
			switch op := rapid.IntRange(0, 6).Draw(rt, "op"); {
			case op <= 2 || len(held) == 0:
				n++
				a := semAcq(fmt.Sprintf("r%d", n), "pool", limit)
				a.Attempt = "t"
				if rapid.Bool().Draw(rt, "wait") {
					a.Wait = time.Minute
				}
				if rapid.IntRange(0, 3).Draw(rt, "delay") == 0 {
					a.LockDelay = time.Second
				}
				c = a
			case op == 3:
				l := rapid.SampledFrom(held).Draw(rt, "release")
				c = &Release{LeaseID: l.ID, SecretHash: secretOfOwner(l.Owner)}
			case op == 4:
				l := rapid.SampledFrom(held).Draw(rt, "expire")
				c = &Expire{LeaseID: l.ID, RenewCount: l.RenewCount}
			case op == 5 && len(queue) > 0:
				key := rapid.SampledFrom(queue).Draw(rt, "timeout")
				if rapid.Bool().Draw(rt, "cancel") {
					c = &Cancel{Key: key, Attempt: "t"}
				} else {
					c = &WaitTimeout{Key: key}
				}
			default:
				var unblock []Command
				s.EachBlock(func(r string, tok uint64, _ time.Duration) {
					unblock = append(unblock, &Unblock{Resource: r, Token: tok})
				})
				if len(unblock) == 0 {
					c = &Unblock{Resource: "none"}
				} else {
					c = rapid.SampledFrom(unblock).Draw(rt, "unblock")
				}
			}
			r := s.Apply(ix, &Batch{Time: t0 + int64(ix), Cmds: []Command{c}})[0]
			if a, ok := c.(*Acquire); ok && r.Queued {
				queue = append(queue, a.Key())
			}
			// Waits that ended leave the model's queue; grants to waiters
			// must come in arrival order.
			for _, k := range obs.ended {
				queue = slices.DeleteFunc(queue, func(q string) bool { return q == k })
			}
			for _, k := range obs.granted {
				if i := slices.Index(queue, k); i > 0 {
					rt.Fatalf("step %d: waiter %d of %d granted before those ahead of it", step, i, len(queue))
				} else if i == 0 {
					queue = queue[1:]
				}
			}
			obs.granted, obs.ended = nil, nil
			if rapid.IntRange(0, 9).Draw(rt, "restore") == 0 {
				snap := s.Snapshot()
				restored, err := Restore(snap, DefaultConfig(), obs)
				if err != nil {
					rt.Fatalf("restore: %v", err)
				}
				if !bytes.Equal(restored.Snapshot(), snap) {
					rt.Fatal("a restored state writes another snapshot")
				}
				s = restored
			}
			held = checkSemaphore(rt, s, limit, queue, lastToken)
		}
	})
}

// secretOfOwner is the secret of the acquire semAcq made for owner.
func secretOfOwner(owner string) [32]byte { return secret(owner[len("owner-"):]) }

// checkSemaphore checks the invariants on "pool" and returns its holders.
func checkSemaphore(rt *rapid.T, s *State, limit int, queue []string, lastToken map[string]uint64) []*leasehold.Lease {
	var held []*leasehold.Lease
	slots := map[string]bool{}
	free := false
	for i := 1; i <= limit; i++ {
		slot := leasehold.SlotName("pool", i)
		l, ok := s.Holder(slot)
		_, blocked := s.LockDelay(slot)
		if !ok {
			free = free || !blocked
			continue
		}
		if blocked {
			rt.Fatalf("slot %s was granted during its lock-delay", slot)
		}
		if l.Slot() != slot || l.Semaphore != "pool" || l.Limit != limit {
			rt.Fatalf("slot %s is held by a lease that names slot %q of %q (limit %d)", slot, l.Slot(), l.Semaphore, l.Limit)
		}
		if slots[slot] {
			rt.Fatalf("slot %s held twice", slot)
		}
		slots[slot] = true
		if l.Token < lastToken[slot] {
			rt.Fatalf("slot %s: token %d after %d", slot, l.Token, lastToken[slot])
		}
		lastToken[slot] = l.Token
		held = append(held, &l)
	}
	all := s.Leases(0, 1000, "")
	if len(all) != len(held) || len(held) > limit {
		rt.Fatalf("%d leases, %d of them on the semaphore's slots (limit %d)", len(all), len(held), limit)
	}
	waiting := s.Waiters("pool")
	if len(waiting) != len(queue) {
		rt.Fatalf("%d waiters, the model has %d", len(waiting), len(queue))
	}
	if free && len(waiting) > 0 {
		rt.Fatalf("%d waiters behind a free slot", len(waiting))
	}
	// The name is a semaphore exactly while someone holds or awaits it.
	if users, sem := len(held)+len(waiting), s.sems["pool"]; users == 0 && sem != nil || users > 0 && (sem == nil || sem.users != users || sem.limit != limit) {
		rt.Fatalf("%d holders and waiters, semaphore record %+v", users, sem)
	}
	return held
}
