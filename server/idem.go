package server

import (
	"context"
	"crypto/sha256"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fsm"
	"github.com/leasehold/leasehold/service"
)

// IdemService is what the idempotency handlers call (implemented by
// *service.Service). It is apart from Service so that handler tests'
// fakes of Service need not grow.
type IdemService interface {
	IdemBegin(ctx context.Context, cmd *service.IdemBegin, wait time.Duration) (service.Result, error)
	IdemComplete(ctx context.Context, cmd *service.IdemComplete) (service.Result, error)
	IdemAbandon(ctx context.Context, key string, cmd *service.Release) (service.Result, error)
	IdemGet(ctx context.Context, key string) (service.Idem, bool, error)
	IdemList(ctx context.Context, prefix, after string, limit int) ([]service.Idem, error)
}

var _ IdemService = (*service.Service)(nil)

// MaxFingerprintLen bounds what a caller sends as a fingerprint; only its
// hash is kept.
const MaxFingerprintLen = 1 << 10

// idemAPI implements leaseholdv1connect.IdempotencyHandler.
type idemAPI struct {
	s   *Server
	svc IdemService
	m   *idemMetrics
}

type idemMetrics struct {
	begins    *prometheus.CounterVec // by outcome
	replays   prometheus.Counter
	abandoned prometheus.Counter
}

func newIdemAPI(s *Server, reg prometheus.Registerer) idemAPI {
	m := &idemMetrics{
		begins: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "leasehold_idem_begins_total",
			Help: "Idempotency Begin requests answered by this node, by outcome: started, in_progress, completed, mismatch or an error code."},
			[]string{"outcome"}),
		replays: prometheus.NewCounter(prometheus.CounterOpts{Name: "leasehold_idem_replays_total",
			Help: "Stored idempotency results served to a Begin by this node."}),
		abandoned: prometheus.NewCounter(prometheus.CounterOpts{Name: "leasehold_idem_abandoned_total",
			Help: "Idempotency attempts abandoned through this node."}),
	}
	reg.MustRegister(m.begins, m.replays, m.abandoned,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "leasehold_idem_keys", Help: "Idempotency keys in use (in progress or completed)."},
			func() float64 { return float64(s.node.Stats().Counts.IdemKeys) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "leasehold_idem_stored_bytes", Help: "Bytes of stored idempotency results (limit max_idem_bytes)."},
			func() float64 { return float64(s.node.Stats().Counts.IdemBytes) }))
	svc, _ := s.svc.(IdemService)
	return idemAPI{s: s, svc: svc, m: m}
}

func (h idemAPI) ready() error {
	if h.svc == nil {
		return leasehold.Errorf(leasehold.CodeUnknown, "this node's service has no idempotency keys")
	}
	return nil
}

func idemKey(k string) error { return leasehold.ValidateName("key", k, fsm.MaxIdemKeyLen, true) }

func (h idemAPI) Begin(ctx context.Context, req *connect.Request[pb.IdempotencyBeginRequest]) (*connect.Response[pb.IdempotencyBeginResponse], error) {
	m := req.Msg
	cmd, wait, secret, err := idemBeginCommand(m, caller(ctx))
	if err != nil {
		h.m.begins.WithLabelValues("invalid").Inc()
		return nil, err
	}
	if err := h.ready(); err != nil {
		return nil, err
	}
	m.Secret = secret // a forwarded copy carries the secret chosen here
	res, err := h.svc.IdemBegin(ctx, cmd, wait)
	if forwarding(req, err) {
		return nil, err
	}
	if err == nil {
		err = res.Err
	}
	if err != nil {
		outcome := leasehold.CodeOf(err).String()
		if leasehold.CodeOf(err) == leasehold.CodeNotHolder {
			outcome = "mismatch"
		}
		h.m.begins.WithLabelValues(outcome).Inc()
		return nil, err
	}
	r := res.Idem()
	h.m.begins.WithLabelValues(r.State.String()).Inc()
	out := &pb.IdempotencyBeginResponse{State: idemStatePB(r.State)}
	switch r.State {
	case fsm.IdemStarted:
		out.Attempt, out.Token, out.Secret, out.ExpiresIn = r.Token, r.Token, secret, durPB(res.Remaining)
	case fsm.IdemCompleted:
		h.m.replays.Inc()
		out.Result, out.OwnerToken = r.Result, r.Token
	case fsm.IdemInProgress:
		out.OwnerToken = r.Token
	}
	return connect.NewResponse(out), nil
}

func idemBeginCommand(m *pb.IdempotencyBeginRequest, caller string) (*service.IdemBegin, time.Duration, string, error) {
	if err := idemKey(m.Key); err != nil {
		return nil, 0, "", err
	}
	if len(m.Fingerprint) == 0 || len(m.Fingerprint) > MaxFingerprintLen {
		return nil, 0, "", leasehold.Errorf(leasehold.CodeInvalid,
			"fingerprint is %d bytes; it must be 1 to %d (a hash of what the request asks for)", len(m.Fingerprint), MaxFingerprintLen)
	}
	if err := leasehold.ValidateName("owner", m.Owner, leasehold.MaxOwnerLen, false); err != nil {
		return nil, 0, "", err
	}
	cmd := &service.IdemBegin{Key: m.Key, Fingerprint: sha256.Sum256(m.Fingerprint), Owner: m.Owner, Caller: caller}
	var err error
	if cmd.TTL, err = duration("attempt_ttl", m.AttemptTtl, leasehold.DefaultTTL); err != nil {
		return nil, 0, "", err
	}
	if err := leasehold.ValidateDuration("attempt_ttl", cmd.TTL, leasehold.MinTTL, leasehold.MaxTTL); err != nil {
		return nil, 0, "", err
	}
	if cmd.Retention, err = duration("retention", m.Retention, 0); err != nil {
		return nil, 0, "", err
	}
	wait, err := duration("wait", m.Wait, 0)
	if err != nil {
		return nil, 0, "", err
	}
	if err := leasehold.ValidateDuration("wait", wait, 0, leasehold.MaxWait); err != nil {
		return nil, 0, "", err
	}
	secret, h, err := secretHash(m.Secret)
	if err != nil {
		return nil, 0, "", err
	}
	cmd.SecretHash = h
	return cmd, wait, secret, nil
}

func (h idemAPI) Complete(ctx context.Context, req *connect.Request[pb.IdempotencyCompleteRequest]) (*connect.Response[pb.IdempotencyCompleteResponse], error) {
	m := req.Msg
	if err := idemKey(m.Key); err != nil {
		return nil, err
	}
	sh, err := attemptRef(m.Attempt, m.Secret)
	if err != nil {
		return nil, err
	}
	if err := h.ready(); err != nil {
		return nil, err
	}
	res, err := h.svc.IdemComplete(ctx, &service.IdemComplete{Key: m.Key, LeaseID: m.Attempt, SecretHash: sh, Result: m.Result})
	if forwarding(req, err) {
		return nil, err
	}
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.IdempotencyCompleteResponse{}), nil
}

func (h idemAPI) Abandon(ctx context.Context, req *connect.Request[pb.IdempotencyAbandonRequest]) (*connect.Response[pb.IdempotencyAbandonResponse], error) {
	m := req.Msg
	if err := idemKey(m.Key); err != nil {
		return nil, err
	}
	sh, err := attemptRef(m.Attempt, m.Secret)
	if err != nil {
		return nil, err
	}
	if err := h.ready(); err != nil {
		return nil, err
	}
	if err := optionalRequestID(m.RequestId); err != nil {
		return nil, err
	}
	res, err := h.svc.IdemAbandon(ctx, m.Key, &service.Release{LeaseID: m.Attempt, SecretHash: sh, Caller: caller(ctx), RequestID: m.RequestId})
	if forwarding(req, err) {
		return nil, err
	}
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return nil, err
	}
	if !res.Dup { // a retry answered from the dedup window abandoned nothing more
		h.m.abandoned.Inc()
	}
	return connect.NewResponse(&pb.IdempotencyAbandonResponse{}), nil
}

func attemptRef(attempt uint64, secret string) ([32]byte, error) {
	if attempt == 0 {
		return [32]byte{}, leasehold.Errorf(leasehold.CodeInvalid, "attempt must be set (the attempt returned by Begin)")
	}
	if secret == "" {
		return [32]byte{}, leasehold.Errorf(leasehold.CodeInvalid, "secret must be set (the secret returned by Begin)")
	}
	_, h, err := secretHash(secret)
	return h, err
}

func (h idemAPI) Get(ctx context.Context, req *connect.Request[pb.IdempotencyGetRequest]) (*connect.Response[pb.IdempotencyGetResponse], error) {
	key := req.Msg.Key
	if err := idemKey(key); err != nil {
		return nil, err
	}
	if err := h.ready(); err != nil {
		return nil, err
	}
	r, ok, err := h.svc.IdemGet(ctx, key)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, leasehold.Errorf(leasehold.CodeNotFound, "idempotency key %q is not in use: never begun, abandoned, lapsed, or forgotten after its retention", key)
	}
	return connect.NewResponse(&pb.IdempotencyGetResponse{Record: idemPB(r, mayReadResult(ctx, key))}), nil
}

func (h idemAPI) List(ctx context.Context, req *connect.Request[pb.IdempotencyListRequest]) (*connect.Response[pb.IdempotencyListResponse], error) {
	m := req.Msg
	if err := leasehold.ValidateName("prefix", m.Prefix, fsm.MaxIdemKeyLen, false); err != nil {
		return nil, err
	}
	limit := int(m.Limit)
	switch {
	case m.Limit > leasehold.MaxListLimit:
		return nil, leasehold.Errorf(leasehold.CodeInvalid, "limit is %d; it must be between 1 and %d", m.Limit, leasehold.MaxListLimit)
	case m.Limit == 0:
		limit = leasehold.DefaultListLimit
	}
	if err := h.ready(); err != nil {
		return nil, err
	}
	rs, err := h.svc.IdemList(ctx, m.Prefix, m.After, limit)
	if err != nil {
		return nil, err
	}
	out := &pb.IdempotencyListResponse{}
	for _, r := range rs {
		out.Records = append(out.Records, idemPB(r, false)) // sizes only: a list never carries bodies
	}
	return connect.NewResponse(out), nil
}

// mayReadResult says whether the caller may see key's stored body: a
// worker (or more) whose prefixes cover the key.
func mayReadResult(ctx context.Context, key string) bool {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return ok && p.Role >= RoleWorker && p.allows(key)
}

func idemPB(r service.Idem, body bool) *pb.IdemRecord {
	out := &pb.IdemRecord{Key: r.Key, State: idemStatePB(r.State), Token: r.Token, Owner: r.Owner,
		StartedAt: timePB(r.StartedAt), CompletedAt: timePB(r.CompletedAt), Retention: durPB(r.Retention),
		ResultSize: uint64(len(r.Result))}
	if body {
		out.Result = r.Result
	}
	return out
}

func idemStatePB(s fsm.IdemState) pb.IdemState {
	switch s {
	case fsm.IdemStarted:
		return pb.IdemState_IDEM_STATE_STARTED
	case fsm.IdemInProgress:
		return pb.IdemState_IDEM_STATE_IN_PROGRESS
	case fsm.IdemCompleted:
		return pb.IdemState_IDEM_STATE_COMPLETED
	}
	return pb.IdemState_IDEM_STATE_UNSPECIFIED
}

func (m *Metrics) newIdemLapsed() prometheus.Counter {
	m.idemLapsed = prometheus.NewCounter(prometheus.CounterOpts{Name: "leasehold_idem_lapsed_total",
		Help: "Idempotency attempts whose lease expired before Complete or Abandon (applied on this node)."})
	return m.idemLapsed
}

// idemEnded counts an idempotency attempt that lapsed.
func (m *Metrics) idemEnded(l *leasehold.Lease, why fsm.EndReason) {
	if why != fsm.EndExpired || len(l.Resources) != 1 {
		return
	}
	if _, ok := fsm.IdemKeyOf(l.Resources[0]); ok {
		m.idemLapsed.Inc()
	}
}
