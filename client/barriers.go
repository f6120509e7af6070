package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/api/leasehold"
)

// Barriers and latches (docs/barriers.md): Await holds a party back until
// every party of the barrier's phase has arrived; CountDown and
// WaitPhase are a latch's two sides. A phase ends once: it trips (with a
// fencing token), or it ends broken (its timeout passed, or it was reset),
// which Wait and Await answer with an error matching ErrBarrierBroken.

// ErrBarrierBroken: the phase waited for ended without tripping (its
// timeout passed, or it was reset). The PhaseEnd returned says which.
var ErrBarrierBroken = errors.New("barrier phase broken")

// Barrier is a barrier or latch as inspection shows it.
type Barrier struct {
	Name      string
	Kind      string // "cyclic" or "latch"
	Parties   int    // a latch: the count it trips at
	Timeout   time.Duration
	CreatedAt time.Time
	Phase     uint64 // the current phase, from 1
	Arrived   int    // arrived (a latch: counted down) in it
	StartedAt time.Time
	Tripped   bool // a latch whose current phase tripped
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

// PhaseEnd is how a phase ended: Outcome "tripped" (Token is the trip's
// fencing token, strictly increasing per barrier), "timed_out" or
// "reset".
type PhaseEnd struct {
	Phase   uint64
	Outcome string
	Token   uint64
	At      time.Time
	Arrived int
}

// BarrierOption changes how CreateBarrier makes a barrier.
type BarrierOption func(*barrierOptions)

type barrierOptions struct {
	latch   bool
	timeout time.Duration
}

// Latch makes a latch: counted down parties times (CountDown), it trips
// and stays tripped until ResetBarrier.
func Latch() BarrierOption { return func(o *barrierOptions) { o.latch = true } }

// PhaseTimeout breaks a phase not tripped d after its first arrival or
// count-down (1s to 24h): its parties' leases end and Wait answers
// ErrBarrierBroken.
func PhaseTimeout(d time.Duration) BarrierOption { return func(o *barrierOptions) { o.timeout = d } }

// ArriveOption changes how Arrive and Await arrive.
type ArriveOption func(*arriveOptions)

type arriveOptions struct {
	participant string
	ttl         time.Duration
	phase       uint64
}

// As names the party (default: the client's owner, HOST/PID). A party
// arrives once a phase.
func As(participant string) ArriveOption {
	return func(o *arriveOptions) { o.participant = participant }
}

// ArrivalTTL is the arrival lease's TTL (default leasehold.DefaultTTL); it
// renews in the background until the phase ends.
func ArrivalTTL(d time.Duration) ArriveOption { return func(o *arriveOptions) { o.ttl = d } }

// InPhase arrives only in phase p: once p has ended, the arrival is
// refused with an error matching leasehold.ErrStaleToken.
func InPhase(p uint64) ArriveOption { return func(o *arriveOptions) { o.phase = p } }

func barriersOf(e *endpoint) leaseholdv1connect.BarriersClient { return e.barriers }

// CreateBarrier makes a cyclic barrier of parties parties (Latch: a latch
// of that count), or returns the one of that name if it is alike. One
// that differs is refused with leasehold.ErrHeld.
func (c *Client) CreateBarrier(ctx context.Context, name string, parties int, opts ...BarrierOption) (Barrier, error) {
	var o barrierOptions
	for _, f := range opts {
		f(&o)
	}
	req := &pb.BarriersCreateRequest{Name: name, Kind: pb.BarrierKind_BARRIER_KIND_CYCLIC, Parties: count(parties)}
	if o.latch {
		req.Kind = pb.BarrierKind_BARRIER_KIND_LATCH
	}
	if o.timeout != 0 {
		req.Timeout = durationpb.New(o.timeout)
	}
	r, err := call(ctx, c, c.cfg.RequestTimeout, barriersOf, leaseholdv1connect.BarriersClient.Create, req)
	if err != nil {
		return Barrier{}, err
	}
	return barrierInfo(r.Barrier), nil
}

// Arrival is a party's arrival at a phase of a barrier. Until the phase
// ends it holds a lease, renewed in the background: if the lease is lost
// (the process stalls past its TTL), the party is no longer counted.
// Its methods are safe for concurrent use.
type Arrival struct {
	c     *Client
	name  string
	phase uint64
	lease *Lease    // nil if this arrival tripped the phase
	end   *PhaseEnd // set if this arrival tripped the phase
}

// Arrive counts a party in the current phase of the cyclic barrier name.
// Wait then blocks until the phase ends. The last party trips the phase
// at once (Arrival.Tripped). It fails with leasehold.ErrHeld if the party
// already arrived in this phase, with leasehold.ErrConflict at a latch.
func (c *Client) Arrive(ctx context.Context, name string, opts ...ArriveOption) (*Arrival, error) {
	o := arriveOptions{participant: DefaultOwner(), ttl: leasehold.DefaultTTL}
	for _, f := range opts {
		f(&o)
	}
	secret := randomHex(leasehold.SecretBytes)
	req := &pb.BarriersArriveRequest{Name: name, Participant: o.participant, Phase: o.phase, Ttl: durationpb.New(o.ttl),
		Secret: secret, RequestId: randomHex(16)}
	var a *Arrival
	lo := options([]Option{TTL(o.ttl), ProgressTimeout(0)})
	lo.failOpen = false
	l, err := c.hold(ctx, []string{leasehold.BarrierPartyResource(name, o.participant)}, lo, secret,
		func(ctx context.Context) (*pb.AcquireResponse, error) {
			r, err := call(ctx, c, c.cfg.RequestTimeout, barriersOf, leaseholdv1connect.BarriersClient.Arrive, req)
			if err != nil {
				if ctx.Err() != nil { // an arrival made after we left is given back
					c.giveBackWith(secret, func(ctx context.Context) (*pb.Lease, error) {
						r, err := call(ctx, c, c.cfg.RequestTimeout, barriersOf, leaseholdv1connect.BarriersClient.Arrive, req)
						return r.GetLease(), err
					})
				}
				return nil, err
			}
			a = &Arrival{c: c, name: name, phase: r.Phase, end: phaseEnd(r.End)}
			if r.Lease == nil {
				return nil, errTripped // this arrival tripped the phase: no lease to hold
			}
			return &pb.AcquireResponse{Lease: r.Lease, Secret: r.Secret, ExpiresIn: r.ExpiresIn}, nil
		})
	if errors.Is(err, errTripped) && a != nil {
		return a, nil
	}
	if err != nil {
		return nil, err
	}
	a.lease = l
	return a, nil
}

var errTripped = errors.New("the arrival tripped its phase")

// Phase is the phase it arrived in.
func (a *Arrival) Phase() uint64 { return a.phase }

// Lease is the arrival's lease; nil if the arrival tripped the phase.
func (a *Arrival) Lease() *Lease { return a.lease }

// Tripped is how the phase ended if this arrival tripped it, else nil.
func (a *Arrival) Tripped() *PhaseEnd { return a.end }

// Wait blocks until the phase ends, and returns how: nil error if it
// tripped, one matching ErrBarrierBroken if it timed out or was reset,
// one matching ErrLeaseLost if the arrival's lease was lost first (the
// party is then no longer counted; Arrive again). The lease ends with the
// phase. If ctx ends first, Wait returns ctx's error and the arrival
// stands: Leave withdraws it.
func (a *Arrival) Wait(parent context.Context) (PhaseEnd, error) {
	if a.end != nil {
		return *a.end, nil
	}
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	lost := make(chan struct{})
	go func() {
		select {
		case <-a.lease.Done():
			close(lost)
			cancel()
		case <-ctx.Done():
		}
	}()
	end, err := a.c.WaitPhase(ctx, a.name, a.phase)
	select {
	case <-lost:
		if err != nil && parent.Err() == nil {
			// A renewal that raced the phase's end finds the lease gone
			// (the end ended it): if the phase ended, that is the answer.
			if end, err, ok := a.c.phaseEndNow(parent, a.name, a.phase); ok {
				return end, err
			}
			return PhaseEnd{}, fmt.Errorf("%w: the arrival at phase %d of %q ended before the phase did: %w", ErrLeaseLost, a.phase, a.name, a.lease.Err())
		}
	default:
	}
	if err == nil || errors.Is(err, ErrBarrierBroken) {
		a.lease.settled() // the phase's end ended it on the server
	}
	return end, err
}

// Leave withdraws the arrival before its phase ends: the party is no
// longer counted. After the phase ended it does nothing.
func (a *Arrival) Leave(ctx context.Context) error {
	if a.lease == nil {
		return nil
	}
	err := a.lease.Release(ctx)
	if errors.Is(err, ErrLeaseLost) && errors.Is(err, leasehold.ErrNotFound) {
		return nil // the phase ended (or the lease lapsed): nothing to withdraw
	}
	return err
}

// settled ends a lease the server ended itself, with nothing sent: a
// tripped or broken phase's arrival.
func (l *Lease) settled() {
	l.stopRenewal()
	l.mu.Lock()
	l.releaseDone = true
	l.mu.Unlock()
	l.end(ErrReleased)
}

// Await arrives at the barrier name and waits for the phase to end: nil
// error once it tripped. If ctx ends first, the arrival is withdrawn
// (bounded by Config.RequestTimeout) and ctx's error returned, so a party
// that gives up is not counted.
func (c *Client) Await(ctx context.Context, name string, opts ...ArriveOption) (PhaseEnd, error) {
	a, err := c.Arrive(ctx, name, opts...)
	if err != nil {
		return PhaseEnd{}, err
	}
	end, err := a.Wait(ctx)
	if err != nil && ctx.Err() != nil {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.RequestTimeout)
		defer cancel()
		a.Leave(lctx)
	}
	return end, err
}

// CountDown counts the latch name down by n (at least 1). It returns the
// latch after it and, if it tripped (now or before), how.
func (c *Client) CountDown(ctx context.Context, name string, n int) (Barrier, *PhaseEnd, error) {
	r, err := call(ctx, c, c.cfg.RequestTimeout, barriersOf, leaseholdv1connect.BarriersClient.CountDown,
		&pb.BarriersCountDownRequest{Name: name, Count: count(n), RequestId: randomHex(16)})
	if err != nil {
		return Barrier{}, nil, err
	}
	return barrierInfo(r.Barrier), phaseEnd(r.End), nil
}

// barrierPoll is the longest one Wait call lasts before the client asks
// again.
const barrierPoll = 30 * time.Second

// WaitPhase blocks until phase (0: the current one) of the barrier or
// latch name ends, in long polls of up to 30s, and returns how: nil
// error if it tripped, one matching ErrBarrierBroken if it timed out or
// was reset, leasehold.ErrNotFound if the barrier is deleted. It only
// reads: leaving early (ctx) changes nothing.
func (c *Client) WaitPhase(ctx context.Context, name string, phase uint64) (PhaseEnd, error) {
	for {
		poll := barrierPoll
		if d, ok := ctx.Deadline(); ok {
			// The node's wait must end before the call's deadline, which
			// it hears too (else it answers deadline exceeded): ask for
			// three quarters of what is left, and near the end, wait out
			// ctx here.
			left := time.Until(d)
			if left < 20*time.Millisecond {
				<-ctx.Done()
				return PhaseEnd{}, ctx.Err()
			}
			poll = min(poll, left*3/4)
		}
		pctx, cancel := context.WithTimeout(ctx, poll+c.cfg.RequestTimeout)
		r, err := call(pctx, c, poll+c.cfg.RequestTimeout, barriersOf, leaseholdv1connect.BarriersClient.Wait,
			&pb.BarriersWaitRequest{Name: name, Phase: phase, Wait: durationpb.New(poll)})
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return PhaseEnd{}, ctx.Err()
			}
			return PhaseEnd{}, err
		}
		phase = r.Phase
		if end, err, ok := phaseAnswer(name, r); ok {
			return end, err
		}
		if err := ctx.Err(); err != nil {
			return PhaseEnd{}, err
		}
	}
}

// phaseEndNow asks once, without waiting, how phase of name ended; ok is
// false if it has not ended (or the question failed).
func (c *Client) phaseEndNow(ctx context.Context, name string, phase uint64) (end PhaseEnd, err error, ok bool) {
	r, err := call(ctx, c, c.cfg.RequestTimeout, barriersOf, leaseholdv1connect.BarriersClient.Wait,
		&pb.BarriersWaitRequest{Name: name, Phase: phase, Wait: durationpb.New(0)})
	if err != nil {
		return PhaseEnd{}, nil, false
	}
	return phaseAnswer(name, r)
}

// phaseAnswer is what a Wait answer means to the waiter: ok once the
// phase ended, with a nil error if it tripped and one matching
// ErrBarrierBroken if not.
func phaseAnswer(name string, r *pb.BarriersWaitResponse) (PhaseEnd, error, bool) {
	e := phaseEnd(r.End)
	if e == nil {
		return PhaseEnd{}, nil, false
	}
	if e.Outcome != leasehold.BarrierTripped.String() {
		return *e, fmt.Errorf("%w: phase %d of %q ended %s", ErrBarrierBroken, e.Phase, name, e.Outcome), true
	}
	return *e, nil, true
}

// ResetBarrier ends the current phase of name (broken, if it had not
// tripped: its parties' waits answer ErrBarrierBroken) and opens the
// next. It returns how the phase it ended ended.
func (c *Client) ResetBarrier(ctx context.Context, name string) (PhaseEnd, error) {
	r, err := call(ctx, c, c.cfg.RequestTimeout, barriersOf, leaseholdv1connect.BarriersClient.Reset,
		&pb.BarriersResetRequest{Name: name, RequestId: randomHex(16)})
	if err != nil {
		return PhaseEnd{}, err
	}
	if e := phaseEnd(r.End); e != nil {
		return *e, nil
	}
	return PhaseEnd{Phase: r.Phase}, nil
}

// DeleteBarrier removes the barrier name; its parties' arrivals end.
func (c *Client) DeleteBarrier(ctx context.Context, name string) error {
	_, err := call(ctx, c, c.cfg.RequestTimeout, barriersOf, leaseholdv1connect.BarriersClient.Delete,
		&pb.BarriersDeleteRequest{Name: name, RequestId: randomHex(16)})
	return err
}

// GetBarrier reads the barrier name, with its current arrivals.
func (c *Client) GetBarrier(ctx context.Context, name string) (Barrier, error) {
	r, err := call(ctx, c, c.cfg.RequestTimeout, barriersOf, leaseholdv1connect.BarriersClient.Get,
		&pb.BarriersGetRequest{Name: name})
	if err != nil {
		return Barrier{}, err
	}
	return barrierInfo(r.Barrier), nil
}

// Barriers lists the barriers whose name starts with prefix, by name.
func (c *Client) Barriers(ctx context.Context, prefix string) ([]Barrier, error) {
	var out []Barrier
	after := ""
	for {
		r, err := call(ctx, c, c.cfg.RequestTimeout, barriersOf, leaseholdv1connect.BarriersClient.List,
			&pb.BarriersListRequest{Prefix: prefix, After: after, Limit: leasehold.MaxListLimit})
		if err != nil {
			return nil, err
		}
		for _, b := range r.Barriers {
			out = append(out, barrierInfo(b))
		}
		if len(r.Barriers) < leasehold.MaxListLimit {
			return out, nil
		}
		after = r.Barriers[len(r.Barriers)-1].Name
	}
}

func barrierInfo(b *pb.Barrier) Barrier {
	out := Barrier{Name: b.GetName(), Kind: leasehold.BarrierKind(b.GetKind()).String(), Parties: int(b.GetParties()),
		Timeout: b.GetTimeout().AsDuration(), Phase: b.GetPhase(), Arrived: int(b.GetArrived()), Tripped: b.GetTripped(),
		Trips: b.GetTrips(), Broken: b.GetBroken()}
	if b.GetCreatedAt() != nil {
		out.CreatedAt = b.GetCreatedAt().AsTime()
	}
	if b.GetStartedAt() != nil {
		out.StartedAt = b.GetStartedAt().AsTime()
	}
	for _, a := range b.GetArrivals() {
		out.Arrivals = append(out.Arrivals, BarrierParty{Participant: a.Participant, LeaseID: a.LeaseId, ArrivedAt: a.GetArrivedAt().AsTime()})
	}
	for _, e := range b.GetEnds() {
		out.Ends = append(out.Ends, *phaseEnd(e))
	}
	return out
}

func phaseEnd(e *pb.PhaseEnd) *PhaseEnd {
	if e == nil {
		return nil
	}
	out := &PhaseEnd{Phase: e.Phase, Outcome: leasehold.BarrierOutcome(e.Outcome).String(), Token: e.Token, Arrived: int(e.Arrived)}
	if e.EndedAt != nil {
		out.At = e.EndedAt.AsTime()
	}
	return out
}
