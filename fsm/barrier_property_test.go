package fsm

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/api/leasehold"
)

// A model test of barriers and latches: callers create, arrive, count
// down, retry, reset and delete on two barriers, while arrival leases
// expire or are released and phase timeouts fire, in random order. After
// every step the state equals a simple model, and the invariants hold: a
// phase ends exactly once and trips only when its party count is reached
// (never before), a retried arrival or count-down acts once and is told
// of the phase it acted in, trip tokens strictly increase per barrier,
// and the countdowns armed are those a new leader rebuilds. A snapshot
// taken at any step (capturing) and at the end restores the same state.

type mBarrier struct {
	kind     leasehold.BarrierKind
	parties  uint32
	timeout  time.Duration
	phase    uint64
	arrivals map[string]mArrival // participant -> its arrival
	counted  uint32
	tripped  bool
	started  bool                // the phase has had an arrival or count-down
	ends     map[uint64]PhaseEnd // every phase that ended (outcome, token)
	lastTrip uint64
}

type mArrival struct {
	lease  uint64
	secret string
}

// mRequest is a request a caller sent and may send again.
type mRequest struct {
	cmd   Command
	phase uint64 // the phase its answer named (0: refused)
	code  leasehold.Code
}

func newMBarrier(c *BarrierCreate) *mBarrier {
	return &mBarrier{kind: c.Type, parties: c.Parties, timeout: c.Timeout, phase: 1,
		arrivals: map[string]mArrival{}, ends: map[uint64]PhaseEnd{}}
}

// end ends the model's current phase.
func (m *mBarrier) end(rt *rapid.T, outcome leasehold.BarrierOutcome, token uint64) {
	if _, again := m.ends[m.phase]; again {
		rt.Fatalf("phase %d ends a second time (%v)", m.phase, outcome)
	}
	m.ends[m.phase] = PhaseEnd{Phase: m.phase, Outcome: outcome, Token: token}
	if outcome == leasehold.BarrierTripped {
		if token <= m.lastTrip {
			rt.Fatalf("phase %d tripped with token %d, not above the last trip's %d", m.phase, token, m.lastTrip)
		}
		m.lastTrip = token
	}
	clear(m.arrivals)
	if m.kind == leasehold.BarrierLatch && outcome == leasehold.BarrierTripped {
		m.tripped = true
		return
	}
	m.next()
}

func (m *mBarrier) next() {
	m.phase++
	m.counted, m.tripped, m.started = 0, false, false
	clear(m.arrivals)
}

func (m *mBarrier) arrived() uint32 {
	if m.kind == leasehold.BarrierLatch {
		return m.counted
	}
	return uint32(len(m.arrivals))
}

func TestBarrierModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		timed := newTimedObserver()
		s := New(DefaultConfig(), timed)
		var capt capturing
		defer capt.done(rt)
		ix, now := uint64(0), t0
		apply := func(c Command) Result {
			ix++
			now += int64(time.Second)
			return s.Apply(ix, &Batch{Time: now, Cmds: []Command{c}})[0]
		}
		names := []string{"jobs/a", "jobs/b"}
		parts := []string{"p1", "p2", "p3", "p4"}
		model := map[string]*mBarrier{}
		var sent []mRequest
		n := 0
		fresh := func(p string) string { n++; return fmt.Sprint(p, n) }

		steps := rapid.IntRange(1, 100).Draw(rt, "steps")
		for range steps {
			name := rapid.SampledFrom(names).Draw(rt, "name")
			m := model[name]
			// phaseArg is the phase a request names: mostly none, or the
			// current one, sometimes one ended or not begun.
			phaseArg := func() (uint64, leasehold.Code) {
				if m == nil {
					return 0, 0
				}
				switch rapid.IntRange(0, 5).Draw(rt, "phase arg") {
				case 0:
					return m.phase, 0
				case 1:
					if m.phase > 1 {
						return m.phase - 1, leasehold.CodeStaleToken
					}
				case 2:
					return m.phase + 1, leasehold.CodeInvalid
				}
				return 0, 0
			}
			switch op := rapid.IntRange(0, 11).Draw(rt, "op"); op {
			case 0: // create
				c := &BarrierCreate{Name: name, Type: rapid.SampledFrom([]leasehold.BarrierKind{leasehold.BarrierCyclic, leasehold.BarrierLatch}).Draw(rt, "kind"),
					Parties: uint32(rapid.IntRange(1, 3).Draw(rt, "parties")), Caller: "c"}
				if rapid.Bool().Draw(rt, "timeout") {
					c.Timeout = time.Minute
				}
				r := apply(c)
				switch {
				case m == nil:
					if r.Err != nil {
						rt.Fatalf("create %s: %v", name, r.Err)
					}
					model[name] = newMBarrier(c)
				case m.kind == c.Type && m.parties == c.Parties && m.timeout == c.Timeout:
					if r.Err != nil || !r.Dup || r.Barrier().Barrier.Phase != m.phase {
						rt.Fatalf("create %s again alike: %+v %v", name, r.Barrier(), r.Err)
					}
				default:
					wantModelCode(rt, "create unlike", r, leasehold.CodeHeld)
				}
			case 1, 2, 3: // a party arrives (a new request, a new secret)
				p := rapid.SampledFrom(parts).Draw(rt, "participant")
				phase, bad := phaseArg()
				sec := fresh("s")
				c := &BarrierArrive{RequestID: fresh("a"), Name: name, Participant: p, Phase: phase, TTL: 10 * time.Second,
					SecretHash: secret(sec), Caller: "c"}
				r := apply(c)
				req := mRequest{cmd: c}
				switch {
				case m == nil:
					wantModelCode(rt, "arrive at no barrier", r, leasehold.CodeNotFound)
				case m.kind != leasehold.BarrierCyclic:
					wantModelCode(rt, "arrive at a latch", r, leasehold.CodeConflict)
				case bad != 0:
					wantModelCode(rt, "arrive in another phase", r, bad)
				case m.arrivals[p] != (mArrival{}):
					wantModelCode(rt, "arrive twice", r, leasehold.CodeHeld)
				default:
					if r.Err != nil || r.Barrier().Phase != m.phase {
						rt.Fatalf("arrive %s at %s phase %d: %+v %v", p, name, m.phase, r.Barrier(), r.Err)
					}
					req.phase = m.phase
					m.started = true
					if uint32(len(m.arrivals))+1 < m.parties {
						if r.Lease == nil || r.Barrier().End != nil {
							rt.Fatalf("arrival %d of %d at %s: lease %v, end %+v", len(m.arrivals)+1, m.parties, name, r.Lease, r.Barrier().End)
						}
						m.arrivals[p] = mArrival{lease: r.Lease.ID, secret: sec}
						break
					}
					// The last party: the phase trips, at once.
					if r.Lease != nil || r.Barrier().End == nil || r.Barrier().End.Outcome != leasehold.BarrierTripped ||
						r.Barrier().End.Arrived != m.parties {
						rt.Fatalf("the last arrival at %s: lease %v, end %+v", name, r.Lease, r.Barrier().End)
					}
					m.end(rt, leasehold.BarrierTripped, r.Barrier().End.Token)
				}
				req.code = leasehold.CodeOf(r.Err)
				sent = append(sent, req)
			case 4, 5: // a latch is counted down
				phase, bad := phaseArg()
				count := uint32(rapid.IntRange(1, 2).Draw(rt, "count"))
				c := &BarrierCountDown{RequestID: fresh("d"), Name: name, Phase: phase, Count: count, Caller: "c"}
				r := apply(c)
				req := mRequest{cmd: c}
				switch {
				case m == nil:
					wantModelCode(rt, "count down no barrier", r, leasehold.CodeNotFound)
				case m.kind != leasehold.BarrierLatch:
					wantModelCode(rt, "count down a cyclic barrier", r, leasehold.CodeConflict)
				case bad != 0:
					wantModelCode(rt, "count down another phase", r, bad)
				default:
					if r.Err != nil || r.Barrier().Phase != m.phase {
						rt.Fatalf("count down %s phase %d: %+v %v", name, m.phase, r.Barrier(), r.Err)
					}
					req.phase = m.phase
					if m.tripped {
						if r.Barrier().End == nil || r.Barrier().End.Outcome != leasehold.BarrierTripped || r.Barrier().Barrier.Arrived != m.parties {
							rt.Fatalf("count down a tripped latch: %+v", r.Barrier())
						}
						break
					}
					m.started = true
					m.counted = min(m.parties, m.counted+count)
					if m.counted < m.parties {
						if r.Barrier().End != nil {
							rt.Fatalf("latch %s tripped at %d of %d", name, m.counted, m.parties)
						}
						break
					}
					if r.Barrier().End == nil || r.Barrier().End.Outcome != leasehold.BarrierTripped {
						rt.Fatalf("latch %s counted to zero without tripping: %+v", name, r.Barrier())
					}
					m.end(rt, leasehold.BarrierTripped, r.Barrier().End.Token)
				}
				req.code = leasehold.CodeOf(r.Err)
				sent = append(sent, req)
			case 6: // a retry of an earlier arrival or count-down: it acts once
				if len(sent) == 0 {
					continue
				}
				req := rapid.SampledFrom(sent).Draw(rt, "retry")
				before := maps.Clone(model)
				arrived := map[string]uint32{}
				for k, mb := range model {
					arrived[k] = mb.arrived()
				}
				r := apply(req.cmd)
				if !r.Dup {
					rt.Fatalf("a retry of %T is not answered from the dedup window: %+v %v", req.cmd, r.Barrier(), r.Err)
				}
				if req.phase == 0 {
					if leasehold.CodeOf(r.Err) != req.code {
						rt.Fatalf("a retry of a refused %T: %v, want %v", req.cmd, r.Err, req.code)
					}
				} else if name := barrierNameOf(req.cmd); model[name] != nil && r.Err == nil && r.Barrier().Phase != req.phase {
					rt.Fatalf("a retry of %T answers phase %d, the first answer was phase %d", req.cmd, r.Barrier().Phase, req.phase)
				}
				for k, mb := range before {
					if got, _ := s.BarrierGet(k); got.Arrived != arrived[k] || got.Phase != mb.phase {
						rt.Fatalf("a retry changed %s: %d arrived at phase %d, want %d at %d", k, got.Arrived, got.Phase, arrived[k], mb.phase)
					}
				}
			case 7, 8: // an arrived party's lease expires, or it leaves
				if m == nil || len(m.arrivals) == 0 {
					continue
				}
				p := rapid.SampledFrom(slices.Sorted(maps.Keys(m.arrivals))).Draw(rt, "lost")
				a := m.arrivals[p]
				var r Result
				if op == 7 {
					r = apply(&Expire{LeaseID: a.lease})
				} else {
					r = apply(&Release{RequestID: fresh("r"), LeaseID: a.lease, SecretHash: secret(a.secret), Caller: "c"})
				}
				if r.Err != nil || r.Lease == nil {
					rt.Fatalf("end %s's arrival lease %d: %+v %v", p, a.lease, r.Lease, r.Err)
				}
				delete(m.arrivals, p) // withdrawn: the phase waits for another
			case 9: // reset
				r := apply(&BarrierReset{RequestID: fresh("x"), Name: name, Caller: "c"})
				if m == nil {
					wantModelCode(rt, "reset no barrier", r, leasehold.CodeNotFound)
					break
				}
				if r.Err != nil || r.Barrier().Phase != m.phase {
					rt.Fatalf("reset %s at phase %d: %+v %v", name, m.phase, r.Barrier(), r.Err)
				}
				if m.tripped {
					m.next()
				} else {
					m.end(rt, leasehold.BarrierReset, 0)
				}
			case 10: // the leader's timeout for the phase runs out
				if m == nil {
					continue
				}
				fire, armed := timed.armed[barrierTimeoutKey(name, m.phase)]
				if want := m.timeout > 0 && m.started && !m.tripped; armed != want {
					rt.Fatalf("%s phase %d: timeout armed %v, want %v", name, m.phase, armed, want)
				}
				if !armed {
					r := apply(&BarrierTimeout{Name: name, Phase: m.phase}) // a stale one: nothing happens
					if r.Barrier() != nil {
						rt.Fatalf("a timeout of a phase not under way acted: %+v", r.Barrier())
					}
					continue
				}
				if r := apply(fire); r.Err != nil || r.Barrier() == nil || r.Barrier().End.Outcome != leasehold.BarrierTimedOut {
					rt.Fatalf("timeout of %s phase %d: %+v %v", name, m.phase, r.Barrier(), r.Err)
				}
				m.end(rt, leasehold.BarrierTimedOut, 0)
			case 11: // delete
				r := apply(&BarrierDelete{RequestID: fresh("z"), Name: name, Caller: "c"})
				if m == nil {
					wantModelCode(rt, "delete no barrier", r, leasehold.CodeNotFound)
					break
				}
				if r.Err != nil {
					rt.Fatalf("delete %s: %v", name, r.Err)
				}
				delete(model, name)
			}
			checkBarrierModel(rt, s, model, names)
			timed.check(rt, s)
			capt.step(rt, s)
		}
		back, err := Restore(s.Snapshot(), DefaultConfig(), nil)
		if err != nil {
			rt.Fatal(err)
		}
		checkBarrierModel(rt, back, model, names)
	})
}

func barrierNameOf(c Command) string {
	switch c := c.(type) {
	case *BarrierArrive:
		return c.Name
	case *BarrierCountDown:
		return c.Name
	}
	return ""
}

func wantModelCode(rt *rapid.T, what string, r Result, c leasehold.Code) {
	rt.Helper()
	if leasehold.CodeOf(r.Err) != c {
		rt.Fatalf("%s: %v (code %v), want code %v", what, r.Err, leasehold.CodeOf(r.Err), c)
	}
}

// checkBarrierModel compares every barrier with the model: phase, count,
// arrivals and their leases, and the ends kept.
func checkBarrierModel(rt *rapid.T, s *State, model map[string]*mBarrier, names []string) {
	rt.Helper()
	for _, name := range names {
		m := model[name]
		got, ok := s.BarrierGet(name)
		if ok != (m != nil) {
			rt.Fatalf("barrier %s exists %v, want %v", name, ok, m != nil)
		}
		if m == nil {
			continue
		}
		if got.Phase != m.phase || got.Arrived != m.arrived() || got.Tripped != m.tripped || got.Parties != m.parties {
			rt.Fatalf("%s: phase %d arrived %d tripped %v, want phase %d arrived %d tripped %v", name,
				got.Phase, got.Arrived, got.Tripped, m.phase, m.arrived(), m.tripped)
		}
		if got.Arrived >= got.Parties && !got.Tripped {
			rt.Fatalf("%s phase %d: %d of %d parties arrived and it has not tripped", name, got.Phase, got.Arrived, got.Parties)
		}
		if len(got.Arrivals) != len(m.arrivals) {
			rt.Fatalf("%s: arrivals %+v, want %v", name, got.Arrivals, m.arrivals)
		}
		for _, a := range got.Arrivals {
			ma, ok := m.arrivals[a.Participant]
			l := s.leases.byID.at(a.LeaseID)
			if !ok || ma.lease != a.LeaseID || l == nil || l.Resources[0] != leasehold.BarrierPartyResource(name, a.Participant) {
				rt.Fatalf("%s: arrival %+v, want %v (its lease %v)", name, a, m.arrivals, l)
			}
		}
		var want []PhaseEnd
		for _, p := range slices.Sorted(maps.Keys(m.ends)) {
			want = append(want, m.ends[p])
		}
		want = want[max(0, len(want)-leasehold.BarrierHistory):]
		if len(got.Ends) != len(want) {
			rt.Fatalf("%s: ends %+v, want %+v", name, got.Ends, want)
		}
		for i, e := range got.Ends {
			if e.Phase != want[i].Phase || e.Outcome != want[i].Outcome || e.Token != want[i].Token {
				rt.Fatalf("%s: ends %+v, want %+v", name, got.Ends, want)
			}
		}
		for p := range m.ends {
			if _, e, err := s.BarrierPhase(name, p); err == nil && (e == nil || e.Outcome != m.ends[p].Outcome) {
				rt.Fatalf("%s: BarrierPhase(%d) = %+v, want %v", name, p, e, m.ends[p].Outcome)
			}
		}
	}
}
