package cluster

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/fsm"
)

// armedCountdowns lists the leader's countdowns of the state's kinds with
// the time each has left, and whether each is still running.
func armedCountdowns(n *Node) map[fsm.CountdownKey]time.Duration {
	t := n.timers
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[fsm.CountdownKey]time.Duration{}
	now := t.cd.now()
	add := func(k fsm.CountdownKey, e *countdown) {
		if e.idx < 0 {
			out[k] = -1 // ran out
		} else {
			out[k] = e.deadline - now
		}
	}
	for k, e := range t.cd.byKey {
		if k != retireKey {
			add(k, e)
		}
	}
	for id, e := range t.cd.leases {
		add(fsm.CountdownKey{Kind: fsm.CountdownLease, ID: id}, e)
	}
	return out
}

// Invariant 5 for every kind of countdown: a new leader (here the same
// node, restarted) rebuilds each from the state and restarts it from its
// takeover, with its whole length: a lease's TTL, a wait bound, a
// lock-delay, a retention, a visibility, a revocation bound and a barrier
// phase's timeout. None runs
// out on the old leader's schedule, and each runs out on the new one's.
// A kind left out of the rebuild is missing after the takeover and never
// runs out.
func TestTakeoverRebuildsEveryCountdown(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	cfg := testConfig(t, t.TempDir())
	cfg.Clock = fake
	n := openNode(t, cfg)
	const bound = 40 * time.Minute
	secret := sha256.Sum256([]byte("secret"))

	mustPropose(t, n, acquireCmd("held", time.Hour, 0, "w"))
	if r := mustPropose(t, n, acquireCmd("waiter", time.Hour, bound, "w")); !r.Queued {
		t.Fatalf("the waiter was answered %+v, want it queued", r)
	}
	brief := acquireCmd("brief", time.Minute, 0, "delayed")
	brief.LockDelay = bound
	mustPropose(t, n, brief)
	begun := mustPropose(t, n, &fsm.IdemBegin{Key: "pay/1", Owner: "api", TTL: time.Hour, Retention: bound, SecretHash: secret})
	mustPropose(t, n, &fsm.IdemComplete{Key: "pay/1", LeaseID: begun.Idem().Token, SecretHash: secret, Result: []byte("ok")})
	mustPropose(t, n, &fsm.QueueCreate{Queue: "q"})
	mustPropose(t, n, &fsm.QueueSend{Queue: "q", Messages: []fsm.QueueMessage{{Key: "k", Body: []byte("m")}}})
	mustPropose(t, n, &fsm.QueueReceive{Queue: "q", Max: 1, Visibility: bound})
	mustPropose(t, n, &fsm.GroupCreate{Group: "g", Partitions: 4, RevokeTimeout: bound})
	mustPropose(t, n, &fsm.GroupJoin{Group: "g", Member: "a", TTL: time.Hour, SecretHash: secret})
	mustPropose(t, n, &fsm.GroupJoin{Group: "g", Member: "b", TTL: time.Hour, SecretHash: secret})
	mustPropose(t, n, &fsm.BarrierCreate{Name: "b", Type: leasehold.BarrierCyclic, Parties: 2, Timeout: bound})
	mustPropose(t, n, &fsm.BarrierArrive{RequestID: "a1", Name: "b", Participant: "p", TTL: time.Hour, SecretHash: secret})

	fake.Advance(time.Minute) // the brief lease expires into its lock-delay
	waitHeld(t, n, 4)         // left: held, the two members' sessions and the party's arrival
	fake.Advance(29 * time.Minute)
	n.Close()

	n2 := openNode(t, cfg) // takes over at the fake clock's "now"
	defer n2.Close()
	kinds := map[fsm.CountdownKind]int{}
	for k, left := range armedCountdowns(n2) {
		kinds[k.Kind]++
		want := bound
		if k.Kind == fsm.CountdownLease {
			want = time.Hour
		}
		if left != want {
			t.Errorf("countdown %+v has %v left after the takeover, want its whole %v", k, left, want)
		}
	}
	want := map[fsm.CountdownKind]int{fsm.CountdownLease: 4, fsm.CountdownWait: 1, fsm.CountdownLockDelay: 1,
		fsm.CountdownRetention: 1, fsm.CountdownVisibility: 1, fsm.CountdownRevocation: 2, fsm.CountdownBarrier: 1}
	for k, c := range want {
		if kinds[k] != c {
			t.Errorf("%d countdowns of kind %d after the takeover, want %d (all: %v)", kinds[k], k, c, kinds)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	fake.Advance(20 * time.Minute) // past every old deadline, short of the new ones
	for k, left := range armedCountdowns(n2) {
		if left < 0 {
			t.Fatalf("countdown %+v ran out on the old leader's schedule", k)
		}
	}
	fake.Advance(21 * time.Minute)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var waiting, blocked, idem, inFlight, revoking, phases int
		n2.ReadLocal(func(st *fsm.State) {
			c := st.Counts()
			waiting, blocked = c.Waiters, c.Blocked
			if _, ok := st.IdemGet("pay/1"); ok {
				idem = 1
			}
			q, _ := st.Queue("q")
			inFlight = q.InFlight
			g, _ := st.Group("g")
			for _, p := range g.Partitions {
				if p.Revoking {
					revoking++
				}
			}
			if b, _ := st.BarrierGet("b"); b.Phase == 1 {
				phases = 1 // its timeout has not broken it yet
			}
		})
		if waiting+blocked+idem+inFlight+revoking+phases == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the new leader's bounds: %d waiting, %d blocked, %d idempotency records, %d in flight, %d revoking, %d barrier phases; want none",
				waiting, blocked, idem, inFlight, revoking, phases)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
