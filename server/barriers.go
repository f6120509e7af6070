package server

import (
	"context"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/service"
)

// barriersAPI implements leaseholdv1connect.BarriersHandler.
type barriersAPI struct {
	s   *Server
	svc service.Barriers
	// calls counts the calls answered by this node, by procedure and
	// outcome (an end's outcome, "waiting", or an error code).
	calls *prometheus.CounterVec
}

func newBarriersAPI(s *Server, reg prometheus.Registerer) barriersAPI {
	h := barriersAPI{s: s, svc: s.svc, calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "leasehold_barrier_calls_total",
		Help: "Barrier calls answered by this node, by call (arrive, count_down, wait, reset) and outcome: arrived, tripped, timed_out, reset, waiting or an error code."},
		[]string{"call", "outcome"})}
	reg.MustRegister(h.calls)
	return h
}

// count counts one answer of call: its phase's outcome, "arrived" (or
// "waiting") while it is under way, or the error's code.
func (h barriersAPI) count(call string, a service.BarrierAnswer, err error) {
	outcome := "arrived"
	switch {
	case err != nil:
		outcome = leasehold.CodeOf(err).String()
	case a.End != nil:
		outcome = a.End.Outcome.String()
	case call == "wait":
		outcome = "waiting"
	}
	h.calls.WithLabelValues(call, outcome).Inc()
}

func (h barriersAPI) Create(ctx context.Context, req *connect.Request[pb.BarriersCreateRequest]) (*connect.Response[pb.BarriersCreateResponse], error) {
	m := req.Msg
	if err := leasehold.ValidateBarrierName(m.Name); err != nil {
		return nil, err
	}
	kind := leasehold.BarrierKind(m.Kind)
	if kind != leasehold.BarrierCyclic && kind != leasehold.BarrierLatch {
		return nil, leasehold.Errorf(leasehold.CodeInvalid, "kind must be BARRIER_KIND_CYCLIC or BARRIER_KIND_LATCH")
	}
	if err := leasehold.ValidateBarrierParties(int(m.Parties)); err != nil {
		return nil, err
	}
	timeout, err := duration("timeout", m.Timeout, 0)
	if err != nil {
		return nil, err
	}
	if err := leasehold.ValidateBarrierTimeout(timeout); err != nil {
		return nil, err
	}
	a, err := h.svc.BarrierCreate(ctx, service.BarrierCreateRequest{Name: m.Name, Kind: kind, Parties: int(m.Parties),
		Timeout: timeout})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.BarriersCreateResponse{Barrier: barrierPB(a.Barrier)}), nil
}

func (h barriersAPI) Arrive(ctx context.Context, req *connect.Request[pb.BarriersArriveRequest]) (*connect.Response[pb.BarriersArriveResponse], error) {
	m := req.Msg
	r, secret, err := arriveRequest(m)
	if err != nil {
		h.count("arrive", service.BarrierAnswer{}, err)
		return nil, err
	}
	if err := h.s.charge(ctx, 1); err != nil {
		return nil, err
	}
	m.RequestId, m.Secret = r.RequestID, secret // a forwarded copy carries them
	a, err := h.svc.BarrierArrive(ctx, r)
	if forwarding(req, err) {
		return nil, err // the leader answers, and counts it
	}
	h.count("arrive", a, err)
	if err != nil {
		return nil, err
	}
	out := &pb.BarriersArriveResponse{Barrier: barrierPB(a.Barrier), Phase: a.Phase, End: phaseEndPB(a.End)}
	if a.Lease != nil {
		out.Lease, out.Secret, out.ExpiresIn = leasePB(a.Lease, a.Remaining), secret, durPB(a.Remaining)
	}
	return connect.NewResponse(out), nil
}

// arriveRequest checks an ArriveRequest; the request_id and secret are
// the caller's or, when it sent none, new ones.
func arriveRequest(m *pb.BarriersArriveRequest) (service.BarrierArriveRequest, string, error) {
	var r service.BarrierArriveRequest
	if err := leasehold.ValidateBarrierName(m.Name); err != nil {
		return r, "", err
	}
	if err := leasehold.ValidateName("participant", m.Participant, leasehold.MaxBarrierParticipantLen, true); err != nil {
		return r, "", err
	}
	ttl, err := duration("ttl", m.Ttl, leasehold.DefaultTTL)
	if err != nil {
		return r, "", err
	}
	if err := leasehold.ValidateDuration("ttl", ttl, leasehold.MinTTL, leasehold.MaxTTL); err != nil {
		return r, "", err
	}
	if m.RequestId != "" && m.Secret == "" {
		// As a Join's: the request ID is scoped to the secret, and a
		// node-made secret differs on every try.
		return r, "", leasehold.Errorf(leasehold.CodeInvalid,
			"an arrival with a request_id needs a secret: a retry is recognised by both, and only the secret can renew or release the arrival; "+
				"send a secret (%d hex characters) you keep, or neither (the node then makes both)", 2*leasehold.SecretBytes)
	}
	id, err := requestID(m.RequestId)
	if err != nil {
		return r, "", err
	}
	secret, hash, err := secretHash(m.Secret)
	if err != nil {
		return r, "", err
	}
	return service.BarrierArriveRequest{RequestID: id, Name: m.Name, Participant: m.Participant, Phase: m.Phase, TTL: ttl,
		SecretHash: hash}, secret, nil
}

func (h barriersAPI) CountDown(ctx context.Context, req *connect.Request[pb.BarriersCountDownRequest]) (*connect.Response[pb.BarriersCountDownResponse], error) {
	m := req.Msg
	if err := leasehold.ValidateBarrierName(m.Name); err != nil {
		return nil, err
	}
	count := int(m.Count)
	if count == 0 {
		count = 1
	}
	if count > leasehold.MaxBarrierParties {
		return nil, leasehold.Errorf(leasehold.CodeInvalid, "count is %d; it must be between 1 and %d", count, leasehold.MaxBarrierParties)
	}
	id, err := requestID(m.RequestId)
	if err != nil {
		return nil, err
	}
	m.RequestId = id
	a, err := h.svc.BarrierCountDown(ctx, service.BarrierCountDownRequest{RequestID: id, Name: m.Name, Phase: m.Phase,
		Count: count})
	if forwarding(req, err) {
		return nil, err
	}
	h.count("count_down", a, err)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.BarriersCountDownResponse{Barrier: barrierPB(a.Barrier), Phase: a.Phase, End: phaseEndPB(a.End)}), nil
}

func (h barriersAPI) Wait(ctx context.Context, req *connect.Request[pb.BarriersWaitRequest]) (*connect.Response[pb.BarriersWaitResponse], error) {
	m := req.Msg
	if err := leasehold.ValidateBarrierName(m.Name); err != nil {
		return nil, err
	}
	wait, err := duration("wait", m.Wait, 0)
	if err != nil {
		return nil, err
	}
	if err := leasehold.ValidateDuration("wait", wait, 0, leasehold.MaxWait); err != nil {
		return nil, err
	}
	a, err := h.svc.BarrierWait(ctx, m.Name, m.Phase, wait)
	if forwarding(req, err) {
		return nil, err
	}
	h.count("wait", a, err)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.BarriersWaitResponse{Barrier: barrierPB(a.Barrier), Phase: a.Phase, Ended: a.End != nil,
		End: phaseEndPB(a.End)}), nil
}

func (h barriersAPI) Reset(ctx context.Context, req *connect.Request[pb.BarriersResetRequest]) (*connect.Response[pb.BarriersResetResponse], error) {
	m := req.Msg
	r, err := h.nameRequest(m.Name, &m.RequestId)
	if err != nil {
		return nil, err
	}
	a, err := h.svc.BarrierReset(ctx, r)
	if forwarding(req, err) {
		return nil, err
	}
	h.count("reset", a, err)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.BarriersResetResponse{Barrier: barrierPB(a.Barrier), Phase: a.Phase, End: phaseEndPB(a.End)}), nil
}

func (h barriersAPI) Delete(ctx context.Context, req *connect.Request[pb.BarriersDeleteRequest]) (*connect.Response[pb.BarriersDeleteResponse], error) {
	m := req.Msg
	r, err := h.nameRequest(m.Name, &m.RequestId)
	if err != nil {
		return nil, err
	}
	if err := h.svc.BarrierDelete(ctx, r); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.BarriersDeleteResponse{}), nil
}

// nameRequest checks a Reset or Delete, and makes its request_id if it
// has none (written back, so that a forwarded copy carries it).
func (h barriersAPI) nameRequest(name string, id *string) (service.BarrierNameRequest, error) {
	if err := leasehold.ValidateBarrierName(name); err != nil {
		return service.BarrierNameRequest{}, err
	}
	rid, err := requestID(*id)
	if err != nil {
		return service.BarrierNameRequest{}, err
	}
	*id = rid
	return service.BarrierNameRequest{RequestID: rid, Name: name}, nil
}

func (h barriersAPI) Get(ctx context.Context, req *connect.Request[pb.BarriersGetRequest]) (*connect.Response[pb.BarriersGetResponse], error) {
	name := req.Msg.Name
	if err := leasehold.ValidateBarrierName(name); err != nil {
		return nil, err
	}
	b, ok, err := h.svc.BarrierGet(ctx, name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, leasehold.Errorf(leasehold.CodeNotFound, "barrier %q does not exist", name)
	}
	return connect.NewResponse(&pb.BarriersGetResponse{Barrier: barrierPB(b)}), nil
}

func (h barriersAPI) List(ctx context.Context, req *connect.Request[pb.BarriersListRequest]) (*connect.Response[pb.BarriersListResponse], error) {
	m := req.Msg
	if err := leasehold.ValidateName("prefix", m.Prefix, leasehold.MaxBarrierNameLen, false); err != nil {
		return nil, err
	}
	if err := leasehold.ValidateName("after", m.After, leasehold.MaxBarrierNameLen, false); err != nil {
		return nil, err
	}
	limit := int(m.Limit)
	if limit == 0 {
		limit = leasehold.DefaultListLimit
	}
	if limit > leasehold.MaxListLimit {
		return nil, leasehold.Errorf(leasehold.CodeInvalid, "limit is %d; the most is %d", limit, leasehold.MaxListLimit)
	}
	bs, err := h.svc.BarrierList(ctx, m.Prefix, m.After, limit)
	if err != nil {
		return nil, err
	}
	out := &pb.BarriersListResponse{Barriers: make([]*pb.Barrier, 0, len(bs))}
	for _, b := range bs {
		out.Barriers = append(out.Barriers, barrierPB(b))
	}
	return connect.NewResponse(out), nil
}

func barrierPB(b service.Barrier) *pb.Barrier {
	out := &pb.Barrier{Name: b.Name, Kind: pb.BarrierKind(b.Kind), Parties: uint32(b.Parties), CreatedAt: timePB(b.CreatedAt),
		Phase: b.Phase, Arrived: uint32(b.Arrived), Tripped: b.Tripped, Trips: b.Trips, Broken: b.Broken}
	if b.Timeout > 0 {
		out.Timeout = durPB(b.Timeout)
	}
	if !b.StartedAt.IsZero() {
		out.StartedAt = timePB(b.StartedAt)
	}
	for _, a := range b.Arrivals {
		out.Arrivals = append(out.Arrivals, &pb.BarrierParty{Participant: a.Participant, LeaseId: a.LeaseID, ArrivedAt: timePB(a.ArrivedAt)})
	}
	for i := range b.Ends {
		out.Ends = append(out.Ends, phaseEndPB(&b.Ends[i]))
	}
	return out
}

func phaseEndPB(e *service.PhaseEnd) *pb.PhaseEnd {
	if e == nil {
		return nil
	}
	return &pb.PhaseEnd{Phase: e.Phase, Outcome: pb.PhaseOutcome(e.Outcome), Token: e.Token, EndedAt: timePB(e.At),
		Arrived: uint32(e.Arrived)}
}
