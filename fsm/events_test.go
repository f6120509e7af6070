package fsm

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/api/leasehold"
)

// eventLog is an Observer that also takes events.
type eventLog struct {
	nopObserver
	ev []Event
}

func (l *eventLog) Event(e Event) { l.ev = append(l.ev, e) }

func (l *eventLog) lines() []string {
	var out []string
	for _, e := range l.ev {
		switch e.Kind {
		case EventPut, EventDeleted:
			out = append(out, fmt.Sprintf("%d %v %s=%s v%d", e.Index, e.Kind, e.Key, e.Value, e.Version))
		default:
			out = append(out, fmt.Sprintf("%d %v lease=%d token=%d %v %s/%s", e.Index, e.Kind, e.LeaseID, e.Token, e.Resources, e.Owner, e.Operation))
		}
	}
	l.ev = nil
	return out
}

func TestEventsOfEachChange(t *testing.T) {
	evs := &eventLog{}
	h := newHarness(t)
	h.s.SetObserver(evs)
	l := h.mustGrant(acq("g1", "a"))                                                 // 1
	h.mustQueue(wacq("w1", "a"))                                                     // 2
	h.mustQueue(wacq("w2", "a"))                                                     // 3
	h.one(renew(l, "g1"))                                                            // 4
	h.one(release(l, "g1"))                                                          // 5: w1 granted in the same entry
	h.one(&WaitTimeout{Key: keyOf("w2")})                                            // 6
	h.one(&Expire{LeaseID: 6})                                                       // 7: no such lease: no event
	h.one(&Put{Key: "k", Value: []byte("v")})                                        // 8
	h.one(&Txn{Then: []TxnOp{put("j", "1"), del("k"), del("none")}})                 // 9
	h.one(&Delete{Key: "j"})                                                         // 10
	g := h.mustGrant(acq("g2", "b"))                                                 // 11
	h.one(&ForceRelease{Resource: "b", LeaseID: g.ID, Actor: "op", Reason: "stuck"}) // 12
	want := []string{
		"1 granted lease=1 token=1 [a] owner-g1/op",
		"2 queued lease=0 token=0 [a] owner-w1/op",
		"3 queued lease=0 token=0 [a] owner-w2/op",
		"4 renewed lease=1 token=1 [a] owner-g1/op",
		"5 released lease=1 token=1 [a] owner-g1/op",
		"5 granted lease=5 token=5 [a] owner-w1/op",
		"6 withdrawn lease=0 token=0 [a] owner-w2/op",
		"8 put k=v v8",
		"9 put j=1 v9",
		"9 deleted k= v8",
		"10 deleted j= v9",
		"11 granted lease=11 token=11 [b] owner-g2/op",
		"12 force_released lease=11 token=11 [b] owner-g2/op",
	}
	got := evs.lines()
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n got %q\nwant %q", got, want)
	}
	h.one(&Expire{LeaseID: 5})
	if got := evs.lines(); !slices.Equal(got, []string{"13 expired lease=5 token=5 [a] owner-w1/op"}) {
		t.Fatalf("expiry events: %q", got)
	}
}

// Nobody listening: emitting costs nothing.
func TestEventsWithoutSinkAllocateNothing(t *testing.T) {
	s := New(DefaultConfig(), &recorder{}) // an Observer that takes no events
	if s.hooks.sink != nil {
		t.Fatal("an Observer without an Event method became the sink")
	}
	l := &leasehold.Lease{ID: 1, Resources: []string{"a"}}
	if n := testing.AllocsPerRun(100, func() {
		s.emitLease(EventGranted, l, 0)
		s.emitKV(EventPut, "k", nil, 1, 0)
		s.emitWaiter(EventQueued, &Acquire{})
	}); n != 0 {
		t.Fatalf("emitting with no sink allocates %v times", n)
	}
}

// The events after any index i are exactly those a replica restored from
// a snapshot at i reports for the rest of the log: in order, no gap, no
// duplicate.
func TestPropertyEventsResumeFromSnapshot(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := newRandomLog(rapid.Uint64().Draw(t, "seed"))
		n := rapid.IntRange(60, 150).Draw(t, "entries")
		split := rapid.IntRange(0, n).Draw(t, "split")
		cfg := Config{DedupWindow: 20 * time.Second, DedupMax: 50, MaxTxnOps: 4}
		all := &eventLog{}
		tee := &teeObserver{Observer: g, sink: all}
		s := New(cfg, tee)
		rest := &eventLog{}
		var restored *State
		var splitIx uint64
		keys := []string{"k1", "k2", "k3"}
		for i := 1; i <= n; i++ {
			cmds := g.batch()
			for j := range cmds { // some KV traffic beside the leases
				switch g.rng.IntN(7) {
				case 0:
					cmds[j] = &Put{Key: keys[g.rng.IntN(3)], Value: []byte(fmt.Sprint(i))}
				case 1:
					cmds[j] = &Delete{Key: keys[g.rng.IntN(3)]}
				case 2:
					cmds[j] = &Txn{Compares: []Compare{{Key: keys[g.rng.IntN(3)], Op: CompareExists}},
						Then: []TxnOp{put(keys[g.rng.IntN(3)], "t")}, Else: []TxnOp{del(keys[g.rng.IntN(3)])}}
				case 3:
					id, name := g.lease()
					cmds[j] = &Txn{Then: []TxnOp{{Key: keys[g.rng.IntN(3)], Value: []byte("b"),
						Lease: &LeaseProof{ID: id, SecretHash: secret(name)}}}}
				}
			}
			ix := uint64(i * 2)
			b := &Batch{Time: t0 + int64(i)*int64(time.Second), Cmds: cmds}
			out := s.Apply(ix, b)
			g.learn(out)
			checkBound(t, s)
			if restored != nil {
				if out2 := restored.Apply(ix, b); !reflect.DeepEqual(out, out2) {
					t.Fatalf("entry %d: restored replica answers differently", ix)
				}
			}
			if i == split {
				var err error
				if restored, err = Restore(s.Snapshot(), cfg, rest); err != nil {
					t.Fatal(err)
				}
				splitIx = ix
			}
		}
		if split == 0 {
			return
		}
		var after []Event
		for k, e := range all.ev {
			if k > 0 && e.Index < all.ev[k-1].Index {
				t.Fatalf("event %d at index %d after one at %d", k, e.Index, all.ev[k-1].Index)
			}
			if e.Index > splitIx {
				after = append(after, e)
			}
		}
		checkBoundEvents(t, all.ev)
		if !reflect.DeepEqual(after, rest.ev) {
			t.Fatalf("after index %d: the log's events\n%+v\ndiffer from the restored replica's\n%+v", splitIx, after, rest.ev)
		}
	})
}

// teeObserver passes Observer calls to one observer and events to a sink.
type teeObserver struct {
	Observer
	sink *eventLog
}

func (o *teeObserver) Event(e Event) { o.sink.Event(e) }

// checkBound: no bound key outlives its lease, and the index lease -> keys
// is exactly the keys' bindings.
func checkBound(t *rapid.T, s *State) {
	n := 0
	for k, it := range s.kv.items.all() {
		if it.Lease == 0 {
			continue
		}
		n++
		if s.leases.byID.at(it.Lease) == nil {
			t.Fatalf("entry %d: key %q outlived its lease %d", s.lastIndex, k, it.Lease)
		}
		if _, ok := s.kv.bound[it.Lease][k]; !ok {
			t.Fatalf("entry %d: key %q bound to %d is missing from the index", s.lastIndex, k, it.Lease)
		}
	}
	for _, keys := range s.kv.bound {
		n -= len(keys)
	}
	if n != 0 {
		t.Fatalf("entry %d: the index holds %d more keys than are bound", s.lastIndex, -n)
	}
}

// checkBoundEvents: a key deleted by its lease's end is deleted at the end's
// index, right after the end event.
func checkBoundEvents(t *rapid.T, evs []Event) {
	for i, e := range evs {
		if e.Kind != EventDeleted || e.LeaseID == 0 {
			continue
		}
		j := i - 1
		for j >= 0 && evs[j].Kind == EventDeleted && evs[j].LeaseID == e.LeaseID {
			j--
		}
		if j < 0 || evs[j].LeaseID != e.LeaseID || evs[j].Index != e.Index ||
			(evs[j].Kind != EventReleased && evs[j].Kind != EventExpired && evs[j].Kind != EventForceReleased) {
			t.Fatalf("key %q deleted by lease %d at index %d does not follow the lease's end", e.Key, e.LeaseID, e.Index)
		}
	}
}
