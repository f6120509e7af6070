package fsm

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/api/leasehold"
)

// semWatch is an Observer that records grants and ended waits in order.
type semWatch struct {
	timedObserver
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
		obs := &semWatch{timedObserver: *newTimedObserver()}
		s := New(DefaultConfig(), obs)
		var capt capturing
		defer capt.done(rt)
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
				var ask Ask = semAcq(fmt.Sprintf("r%d", n), "pool", limit)
				if rapid.IntRange(0, 3).Draw(rt, "plain") == 0 {
					// A lock on the name or a slot's name: refused while the
					// semaphore is in use, and blocks it while held.
					ask = acq(fmt.Sprintf("r%d", n), rapid.SampledFrom([]string{"pool", "pool#1", "pool#2"}).Draw(rt, "lock"))
				}
				a := ask.Base()
				a.Attempt = "t"
				if rapid.Bool().Draw(rt, "wait") {
					a.Wait = time.Minute
				}
				if rapid.IntRange(0, 3).Draw(rt, "delay") == 0 {
					a.LockDelay = time.Second
				}
				c = ask
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
				s.EachCountdown(func(c Countdown) {
					if u, ok := c.Fire.(*Unblock); ok {
						unblock = append(unblock, u)
					}
				})
				if len(unblock) == 0 {
					c = &Unblock{Resource: "none"}
				} else {
					c = rapid.SampledFrom(unblock).Draw(rt, "unblock")
				}
			}
			r := s.Apply(ix, &Batch{Time: t0 + int64(ix), Cmds: []Command{c}})[0]
			if a, ok := c.(*SemAcquire); ok && r.Queued && a.Limit > 0 {
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
				obs.reset(s)
			}
			obs.check(rt, s)
			capt.step(rt, s)
			checkSemaphore(rt, s, limit, queue, lastToken)
			held = nil
			for _, l := range s.Leases(0, 1000, "") {
				held = append(held, &l)
			}
		}
	})
}

// secretOfOwner is the secret of the acquire semAcq made for owner.
func secretOfOwner(owner string) [32]byte { return secret(owner[len("owner-"):]) }

// checkSemaphore checks the invariants on "pool", which may also be
// locked (by name or a slot's name) while it is no semaphore.
func checkSemaphore(rt *rapid.T, s *State, limit int, queue []string, lastToken map[string]uint64) {
	// Its names: "pool" and its slots' (with a limit of 1, "pool#2" is
	// just another name).
	names := map[string]bool{"pool": true}
	for i := 1; i <= limit; i++ {
		names[leasehold.SlotName("pool", i)] = true
	}
	semLeases, plain := 0, 0
	for _, l := range s.Leases(0, 1000, "") {
		if l.Semaphore == "" {
			if names[l.Resources[0]] {
				plain++
			}
			continue
		}
		semLeases++
		if l.Semaphore != "pool" || l.Limit != limit {
			rt.Fatalf("lease %d holds %q of %q (limit %d)", l.ID, l.Slot(), l.Semaphore, l.Limit)
		}
	}
	semWaiters, plainWaiters := 0, 0
	for _, w := range s.leases.waiters.all() {
		if _, ok := w.ask.(*SemAcquire); ok {
			semWaiters++
		} else if names[w.Resources[0]] {
			plainWaiters++
		}
	}
	inUse := semLeases+semWaiters > 0
	if inUse && plain+plainWaiters > 0 {
		rt.Fatalf("the semaphore is in use (%d holders, %d waiters) beside %d locks and %d lock waiters on its names",
			semLeases, semWaiters, plain, plainWaiters)
	}
	free := false
	for i := 1; i <= limit; i++ {
		slot := leasehold.SlotName("pool", i)
		l, ok := s.Holder(slot)
		_, blocked := s.LockDelay(slot)
		if !ok {
			free = free || !blocked
			continue
		}
		if l.Semaphore == "" {
			free = false // a lock holds it: no slot to give until it ends
			continue
		}
		if blocked {
			rt.Fatalf("slot %s was granted during its lock-delay", slot)
		}
		if l.Slot() != slot {
			rt.Fatalf("slot %s is held by a lease that names slot %q", slot, l.Slot())
		}
		if l.Token < lastToken[slot] {
			rt.Fatalf("slot %s: token %d after %d", slot, l.Token, lastToken[slot])
		}
		lastToken[slot] = l.Token
	}
	if semLeases > limit {
		rt.Fatalf("%d holders of a semaphore of %d", semLeases, limit)
	}
	if semWaiters != len(queue) {
		rt.Fatalf("%d waiters, the model has %d", semWaiters, len(queue))
	}
	if free && semWaiters > 0 {
		rt.Fatalf("%d waiters behind a free slot", semWaiters)
	}
	// The name is a semaphore exactly while someone holds or awaits it.
	if users, sem := semLeases+semWaiters, s.sems.byName.at("pool"); users == 0 && sem != nil || users > 0 && (sem == nil || sem.users != users || sem.limit != limit) {
		rt.Fatalf("%d holders and waiters, semaphore record %+v", users, sem)
	}
}
