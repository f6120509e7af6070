package cluster

import (
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/fsm"
)

func activeTimers(c clock.Clock) *timers {
	t := newTimers(c, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.active = true
	return t
}

// leaseCountdown is what the state arms for lease id.
func leaseCountdown(id, renewCount uint64, after time.Duration) fsm.Countdown {
	return fsm.Countdown{Key: fsm.CountdownKey{Kind: fsm.CountdownLease, ID: id}, After: after,
		Fire: &fsm.Expire{LeaseID: id, RenewCount: renewCount}}
}

func expired(t *testing.T, tm *timers) []uint64 {
	t.Helper()
	var ids []uint64
	for _, c := range tm.take() {
		e, ok := c.(*fsm.Expire)
		if !ok {
			t.Fatalf("proposed %T, want only expiries", c)
		}
		ids = append(ids, e.LeaseID)
	}
	return ids
}

// The leader's lease countdowns run on one runtime timer, whatever the
// number of leases, and each runs out at its own deadline, in deadline
// order; a renewal pushes it back, an ended lease never expires, and a
// countdown that ran out still knows the lease's age until the lease ends.
func TestLeaseCountdownsShareOneTimer(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	tm := activeTimers(fake)
	for id := uint64(1); id <= 1000; id++ {
		tm.arm(leaseCountdown(id, 0, time.Duration(1001-id)*time.Second))
	}
	if n := fake.Pending(); n != 1 {
		t.Fatalf("%d runtime timers pending for 1000 leases, want 1", n)
	}
	tm.arm(leaseCountdown(1000, 1, time.Hour))                     // was due in 1s
	tm.disarm(fsm.CountdownKey{Kind: fsm.CountdownLease, ID: 999}) // was due in 2s

	fake.Advance(3 * time.Second)
	if got := expired(t, tm); len(got) != 1 || got[0] != 998 {
		t.Fatalf("after 3s expired %v, want [998]", got)
	}
	fake.Advance(2 * time.Second)
	if got := expired(t, tm); len(got) != 2 || got[0] != 997 || got[1] != 996 {
		t.Fatalf("after 5s expired %v, want [997 996] in deadline order", got)
	}
	if age := tm.age(998); age != 5*time.Second {
		t.Fatalf("age of a lease whose countdown ran out: %v, want 5s", age)
	}
	if d, ok := tm.expiresIn(1000); !ok || d != time.Hour-5*time.Second {
		t.Fatalf("renewed lease expires in %v %v, want 59m55s", d, ok)
	}
	if _, ok := tm.expiresIn(999); ok {
		t.Fatal("an ended lease still has a countdown")
	}
	fake.Advance(995 * time.Second) // every original deadline has passed
	got := expired(t, tm)
	if len(got) != 995 || got[len(got)-1] != 1 {
		t.Fatalf("after 1000s expired %d leases ending with %v, want 995 ending with lease 1", len(got), got[len(got)-1:])
	}
	if n := fake.Pending(); n != 1 {
		t.Fatalf("%d runtime timers pending for the renewed lease, want 1", n)
	}
	tm.deactivate()
	if n := fake.Pending(); n != 0 {
		t.Fatalf("%d runtime timers pending after losing leadership, want 0", n)
	}
}

// A leader's countdown costs little memory per lease (a runtime timer
// and closure per lease took about 215 bytes), its expiry included.
func TestLeaseCountdownMemory(t *testing.T) {
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	const leases = 100_000
	base := heap()
	tm := activeTimers(clock.Real{})
	for id := uint64(1); id <= leases; id++ {
		tm.arm(leaseCountdown(id, 0, time.Hour))
	}
	per := float64(heap()-base) / leases
	runtime.KeepAlive(tm)
	tm.deactivate()
	t.Logf("%.0f bytes per lease countdown", per)
	if per > 130 {
		t.Fatalf("%.0f bytes per lease countdown, want at most 130", per)
	}
}
