package service

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fsm"
)

// Barriers and latches on a node (fsm/barrier.go has the rules): typed
// requests in, typed answers out, the state machine's commands built
// here. An arrival is a lease, so its renewal is Renew and leaving early
// is Release. Wait is a read: a long poll woken by the barrier's events
// in the node's watch hub, bounded by its wait, and safe to leave at any
// moment (it changes nothing).

// BarrierCreateRequest asks for a barrier of Parties parties (a latch: the
// count it trips at). Timeout 0 is none. The caller of every request is
// the one its context carries (CallerOf).
type BarrierCreateRequest struct {
	Name    string
	Kind    leasehold.BarrierKind
	Parties int
	Timeout time.Duration
}

// BarrierArriveRequest is a party's arrival, bound to a new lease of TTL
// whose secret hashes to SecretHash. Phase 0 is the current phase.
type BarrierArriveRequest struct {
	RequestID   string
	Name        string
	Participant string
	Phase       uint64
	TTL         time.Duration
	SecretHash  [32]byte
}

// BarrierCountDownRequest counts a latch down by Count.
type BarrierCountDownRequest struct {
	RequestID string
	Name      string
	Phase     uint64
	Count     int
}

// BarrierNameRequest names a barrier to reset or delete.
type BarrierNameRequest struct {
	RequestID string
	Name      string
}

// Barrier is a barrier as inspection shows it.
type Barrier struct {
	Name      string
	Kind      leasehold.BarrierKind
	Parties   int
	Timeout   time.Duration
	CreatedAt time.Time
	Phase     uint64
	Arrived   int
	StartedAt time.Time // the current phase's first arrival (zero: none yet)
	Tripped   bool      // a latch whose current phase tripped
	Arrivals  []BarrierParty
	Ends      []PhaseEnd // the last phases that ended, oldest first
	Trips     uint64
	Broken    uint64
}

// BarrierParty is an arrival of the current phase.
type BarrierParty struct {
	Participant string
	LeaseID     uint64
	ArrivedAt   time.Time
}

// PhaseEnd is how a phase ended; Token is a trip's fencing token.
type PhaseEnd struct {
	Phase   uint64
	Outcome leasehold.BarrierOutcome
	Token   uint64
	At      time.Time
	Arrived int
}

// BarrierAnswer is what a barrier call answers: the barrier, the phase it
// acted in (or waited for) and, once that phase ended, how. An arrival
// that did not trip its phase has its lease.
type BarrierAnswer struct {
	Barrier   Barrier
	Phase     uint64
	End       *PhaseEnd
	Lease     *leasehold.Lease
	Remaining time.Duration
	Dup       bool
}

// barrierFallbackPoll is how often a Wait looks at its phase again if no
// event woke it (the watcher was cut off): as idemFallbackPoll.
var barrierFallbackPoll = time.Second

// BarrierCreate creates a barrier, or answers with the same one there.
func (s *Service) BarrierCreate(ctx context.Context, req BarrierCreateRequest) (BarrierAnswer, error) {
	return s.barrierPropose(ctx, &fsm.BarrierCreate{Name: req.Name, Type: req.Kind, Parties: uint32(req.Parties),
		Timeout: req.Timeout, Caller: CallerOf(ctx).Name})
}

// BarrierArrive proposes an arrival.
func (s *Service) BarrierArrive(ctx context.Context, req BarrierArriveRequest) (BarrierAnswer, error) {
	return s.barrierPropose(ctx, &fsm.BarrierArrive{RequestID: req.RequestID, Name: req.Name, Participant: req.Participant,
		Phase: req.Phase, TTL: req.TTL, SecretHash: req.SecretHash, Caller: CallerOf(ctx).Name})
}

// BarrierCountDown proposes a count-down.
func (s *Service) BarrierCountDown(ctx context.Context, req BarrierCountDownRequest) (BarrierAnswer, error) {
	return s.barrierPropose(ctx, &fsm.BarrierCountDown{RequestID: req.RequestID, Name: req.Name, Phase: req.Phase,
		Count: uint32(req.Count), Caller: CallerOf(ctx).Name})
}

// BarrierReset ends the current phase and opens the next.
func (s *Service) BarrierReset(ctx context.Context, req BarrierNameRequest) (BarrierAnswer, error) {
	return s.barrierPropose(ctx, &fsm.BarrierReset{RequestID: req.RequestID, Name: req.Name, Caller: CallerOf(ctx).Name})
}

// BarrierDelete removes a barrier.
func (s *Service) BarrierDelete(ctx context.Context, req BarrierNameRequest) error {
	_, err := s.barrierPropose(ctx, &fsm.BarrierDelete{RequestID: req.RequestID, Name: req.Name, Caller: CallerOf(ctx).Name})
	return err
}

func (s *Service) barrierPropose(ctx context.Context, cmd fsm.Command) (BarrierAnswer, error) {
	res, err := s.node.Propose(ctx, cmd)
	if err != nil {
		return BarrierAnswer{}, err
	}
	if res.Err != nil {
		return BarrierAnswer{}, res.Err
	}
	a := BarrierAnswer{Lease: res.Lease, Remaining: res.Remaining, Dup: res.Dup}
	if r := res.Barrier(); r != nil {
		a.Barrier, a.Phase, a.End = barrierOf(r.Barrier), r.Phase, phaseEndOf(r.End)
	}
	return a, nil
}

// BarrierWait waits up to wait for phase (0: the current one) of name to
// end, and answers how it stands: End is set once it ended. It returns
// early, with ctx's error, if ctx ends. It watches the barrier's events
// from before each read, so an end applied after the read wakes it.
func (s *Service) BarrierWait(ctx context.Context, name string, phase uint64, wait time.Duration) (BarrierAnswer, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var woken <-chan Batch
	if w, err := s.hub.Watch(wctx, WatchRequest{Prefixes: []string{leasehold.BarrierPartyResource(name, "")}, Now: true}); err == nil {
		defer w.Close()
		woken = w.Batches()
	}
	poll := time.NewTicker(barrierFallbackPoll)
	defer poll.Stop()
	timeout := time.NewTimer(wait)
	defer timeout.Stop()
	for {
		var info fsm.BarrierInfo
		var end *fsm.PhaseEnd
		var perr error
		if err := s.node.Read(ctx, func(st *fsm.State) { info, end, perr = st.BarrierPhase(name, phase) }); err != nil {
			return BarrierAnswer{}, err
		}
		if perr != nil {
			return BarrierAnswer{}, perr
		}
		if phase == 0 {
			phase = info.Phase // wait for the phase current now, even once the next opens
		}
		a := BarrierAnswer{Barrier: barrierOf(info), Phase: phase, End: phaseEndOf(end)}
		if end != nil {
			return a, nil
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return a, ctx.Err()
			case <-timeout.C:
				return a, nil
			case b, ok := <-woken:
				if !ok {
					woken = nil // cut off: the fallback poll carries on
					break wait
				}
				if len(b.Events) > 0 {
					break wait
				}
			case <-poll.C:
				break wait
			}
		}
	}
}

// BarrierGet reads a barrier.
func (s *Service) BarrierGet(ctx context.Context, name string) (Barrier, bool, error) {
	var info fsm.BarrierInfo
	var ok bool
	err := s.node.Read(ctx, func(st *fsm.State) { info, ok = st.BarrierGet(name) })
	return barrierOf(info), ok, err
}

// BarrierList lists up to limit barriers with prefix after after, in name
// order, without their arrivals.
func (s *Service) BarrierList(ctx context.Context, prefix, after string, limit int) ([]Barrier, error) {
	var infos []fsm.BarrierInfo
	err := s.node.Read(ctx, func(st *fsm.State) { infos = st.BarrierList(prefix, after, limit) })
	out := make([]Barrier, len(infos))
	for i, info := range infos {
		out[i] = barrierOf(info)
	}
	return out, err
}

func barrierOf(b fsm.BarrierInfo) Barrier {
	out := Barrier{Name: b.Name, Kind: b.Kind, Parties: int(b.Parties), Timeout: b.Timeout, CreatedAt: b.CreatedAt,
		Phase: b.Phase, Arrived: int(b.Arrived), StartedAt: b.StartedAt, Tripped: b.Tripped, Trips: b.Trips, Broken: b.Broken}
	for _, a := range b.Arrivals {
		out.Arrivals = append(out.Arrivals, BarrierParty{Participant: a.Participant, LeaseID: a.LeaseID, ArrivedAt: a.ArrivedAt})
	}
	for i := range b.Ends {
		out.Ends = append(out.Ends, *phaseEndOf(&b.Ends[i]))
	}
	return out
}

func phaseEndOf(e *fsm.PhaseEnd) *PhaseEnd {
	if e == nil {
		return nil
	}
	return &PhaseEnd{Phase: e.Phase, Outcome: e.Outcome, Token: e.Token, At: e.At, Arrived: int(e.Arrived)}
}
