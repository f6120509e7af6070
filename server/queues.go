package server

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fsm"
	"github.com/leasehold/leasehold/service"
)

// QueueService is what the queue handlers call (implemented by
// *service.Service), apart from Service so that handler tests' fakes of
// Service need not grow.
type QueueService interface {
	QueueCommand(ctx context.Context, cmd fsm.Command) (service.Result, error)
	QueueCommands(ctx context.Context, cmds []fsm.Command) ([]service.Result, error)
	QueueReceive(ctx context.Context, cmd *service.QueueReceive, wait time.Duration) (service.Result, error)
	QueueGet(ctx context.Context, name string, inFlight int) (service.QueueInfo, []service.Delivery, bool, error)
	QueueList(ctx context.Context, prefix, after string, limit int) ([]service.QueueInfo, error)
	QueueDeadLetters(ctx context.Context, name string, limit int) ([]service.DeadLetter, bool, error)
}

var _ QueueService = (*service.Service)(nil)

// queuesAPI implements leaseholdv1connect.QueuesHandler.
type queuesAPI struct {
	s       *Server
	svc     QueueService
	maxBody int
	drain   *drainRates // each queue's recent acks, for the retry-after hint
}

func newQueuesAPI(s *Server, maxBody int) queuesAPI {
	svc, _ := s.svc.(QueueService)
	return queuesAPI{s: s, svc: svc, maxBody: maxBody, drain: newDrainRates(time.Now)}
}

func (h queuesAPI) ready() error {
	if h.svc == nil {
		return leasehold.Errorf(leasehold.CodeUnknown, "this node's service has no queues")
	}
	return nil
}

// propose runs one queue command; answered is false when the request goes
// to the leader (see forwarding), which answers and counts it.
func (h queuesAPI) propose(ctx context.Context, req connect.AnyRequest, cmd fsm.Command) (service.Result, bool, error) {
	if err := h.ready(); err != nil {
		return service.Result{}, false, err
	}
	res, err := h.svc.QueueCommand(ctx, cmd)
	if forwarding(req, err) {
		return res, false, err
	}
	if err == nil {
		err = res.Err
	}
	return res, true, err
}

func (h queuesAPI) Create(ctx context.Context, req *connect.Request[pb.QueuesCreateRequest]) (*connect.Response[pb.QueuesCreateResponse], error) {
	m := req.Msg
	if err := queueName(m.Queue); err != nil {
		return nil, err
	}
	set, err := queueSettings(m.GetSettings())
	if err != nil {
		return nil, err
	}
	if err := optionalRequestID(m.RequestId); err != nil {
		return nil, err
	}
	res, _, err := h.propose(ctx, req, &service.QueueCreate{Queue: m.Queue, Settings: set, Caller: Identity(ctx), RequestID: m.RequestId})
	if err != nil {
		return nil, err
	}
	info, _, _, err := h.svc.QueueGet(ctx, m.Queue, 0)
	if err != nil {
		return nil, err
	}
	existed := res.Queue() != nil && res.Queue().Existed
	if !res.Dup {
		h.s.log.Info("queue created", "queue", m.Queue, "actor", Identity(ctx))
	}
	return connect.NewResponse(&pb.QueuesCreateResponse{Queue: queueInfoPB(info, time.Now()), Existed: existed}), nil
}

func (h queuesAPI) List(ctx context.Context, req *connect.Request[pb.QueuesListRequest]) (*connect.Response[pb.QueuesListResponse], error) {
	m := req.Msg
	if err := leasehold.ValidateName("prefix", m.Prefix, leasehold.MaxResourceLen, false); err != nil {
		return nil, err
	}
	limit, err := listLimit("limit", m.Limit, leasehold.DefaultListLimit, leasehold.MaxListLimit)
	if err != nil {
		return nil, err
	}
	if err := h.ready(); err != nil {
		return nil, err
	}
	qs, err := h.svc.QueueList(ctx, m.Prefix, m.After, limit)
	if err != nil {
		return nil, err
	}
	out, now := &pb.QueuesListResponse{}, time.Now()
	for _, q := range qs {
		out.Queues = append(out.Queues, queueInfoPB(q, now))
	}
	return connect.NewResponse(out), nil
}

func (h queuesAPI) Get(ctx context.Context, req *connect.Request[pb.QueuesGetRequest]) (*connect.Response[pb.QueuesGetResponse], error) {
	m := req.Msg
	if err := queueName(m.Queue); err != nil {
		return nil, err
	}
	limit, err := listLimit("in_flight_limit", m.InFlightLimit, defaultInFlightShow, leasehold.MaxListLimit)
	if err != nil {
		return nil, err
	}
	if err := h.ready(); err != nil {
		return nil, err
	}
	info, ds, ok, err := h.svc.QueueGet(ctx, m.Queue, limit)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, queueNotFound(m.Queue)
	}
	out := &pb.QueuesGetResponse{Queue: queueInfoPB(info, time.Now())}
	for _, d := range ds {
		out.InFlight = append(out.InFlight, deliveryPB(d, false))
	}
	return connect.NewResponse(out), nil
}

func queueNotFound(name string) error {
	return leasehold.Errorf(leasehold.CodeNotFound, "queue %q does not exist", name)
}

func (h queuesAPI) Purge(ctx context.Context, req *connect.Request[pb.QueuesPurgeRequest]) (*connect.Response[pb.QueuesPurgeResponse], error) {
	m, actor := req.Msg, Identity(ctx)
	if err := queueName(m.Queue); err != nil {
		return nil, err
	}
	if err := auditReason(m.Reason, actor); err != nil {
		return nil, err
	}
	if err := optionalRequestID(m.RequestId); err != nil {
		return nil, err
	}
	res, answered, err := h.propose(ctx, req, &service.QueuePurge{Queue: m.Queue, Actor: actor, Reason: m.Reason, RequestID: m.RequestId})
	if err != nil {
		return nil, err
	}
	if answered && !res.Dup {
		h.s.log.Warn("queue purged", "queue", m.Queue, "actor", actor, "reason", m.Reason, "dropped", res.Queue().Moved)
	}
	return connect.NewResponse(&pb.QueuesPurgeResponse{Dropped: uint64(res.Queue().Moved)}), nil
}

func (h queuesAPI) Delete(ctx context.Context, req *connect.Request[pb.QueuesDeleteRequest]) (*connect.Response[pb.QueuesDeleteResponse], error) {
	m, actor := req.Msg, Identity(ctx)
	if err := queueName(m.Queue); err != nil {
		return nil, err
	}
	if err := auditReason(m.Reason, actor); err != nil {
		return nil, err
	}
	if err := optionalRequestID(m.RequestId); err != nil {
		return nil, err
	}
	if _, _, err := h.propose(ctx, req, &service.QueueDelete{Queue: m.Queue, Actor: actor, Reason: m.Reason, RequestID: m.RequestId}); err != nil {
		return nil, err
	}
	h.s.metrics.forgetQueue(m.Queue)
	h.drain.forget(m.Queue)
	h.s.log.Warn("queue deleted", "queue", m.Queue, "actor", actor, "reason", m.Reason)
	return connect.NewResponse(&pb.QueuesDeleteResponse{}), nil
}

func (h queuesAPI) Send(ctx context.Context, req *connect.Request[pb.QueuesSendRequest]) (*connect.Response[pb.QueuesSendResponse], error) {
	cmd, err := queueSendCommand(req.Msg, caller(ctx), h.maxBody)
	if err != nil {
		return nil, err
	}
	res, err := h.send(ctx, req, cmd)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(res[0]), nil
}

func (h queuesAPI) SendBatch(ctx context.Context, req *connect.Request[pb.QueuesSendBatchRequest]) (*connect.Response[pb.QueuesSendBatchResponse], error) {
	cmd, err := queueSendBatchCommand(req.Msg, caller(ctx), h.maxBody)
	if err != nil {
		return nil, err
	}
	res, err := h.send(ctx, req, cmd)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.QueuesSendBatchResponse{Results: res}), nil
}

func (h queuesAPI) send(ctx context.Context, req connect.AnyRequest, cmd *service.QueueSend) ([]*pb.QueuesSendResponse, error) {
	res, answered, err := h.propose(ctx, req, cmd)
	if err != nil {
		if answered && leasehold.CodeOf(err) == leasehold.CodeLimit {
			return nil, h.backpressure(cmd.Queue, len(cmd.Messages), err)
		}
		return nil, err
	}
	out := make([]*pb.QueuesSendResponse, len(res.Queue().Seqs))
	sent := 0
	for i, seq := range res.Queue().Seqs {
		out[i] = &pb.QueuesSendResponse{Sequence: seq, Duplicate: res.Queue().Duplicate[i]}
		if !out[i].Duplicate {
			sent++
		}
	}
	h.s.metrics.QueueSent.WithLabelValues(cmd.Queue).Add(float64(sent))
	return out, nil
}

// backpressure is a Send of need messages refused because a queue or the
// node is full: resource_exhausted with a QueueRetryAfter detail (the time
// the queue's recent ack rate takes to free that room: queue_drain.go) and
// a Retry-After header (whole seconds, rounded up), which clients read to
// back off.
func (h queuesAPI) backpressure(queue string, need int, err error) error {
	limit := "limit"
	for _, l := range []string{"max_depth", "max_bytes", "max_queue_bytes", "max_queue_dedup_ids"} {
		if strings.Contains(err.Error(), "(limit "+l+" ") {
			limit = l
		}
	}
	h.s.metrics.QueueRefused.WithLabelValues(queue, limit).Inc()
	ce := api.ToConnect(err).(*connect.Error)
	hint := h.drain.retryAfter(queue, need)
	if d, derr := connect.NewErrorDetail(&pb.QueueRetryAfter{RetryAfter: durationpb.New(hint), Limit: limit}); derr == nil {
		ce.AddDetail(d)
	}
	ce.Meta().Set("Retry-After", strconv.Itoa(int((hint+time.Second-1)/time.Second)))
	return ce
}

func (h queuesAPI) Receive(ctx context.Context, req *connect.Request[pb.QueuesReceiveRequest]) (*connect.Response[pb.QueuesReceiveResponse], error) {
	cmd, wait, err := queueReceiveCommand(req.Msg, caller(ctx))
	if err != nil {
		return nil, err
	}
	if err := h.ready(); err != nil {
		return nil, err
	}
	res, err := h.svc.QueueReceive(ctx, cmd, wait)
	if forwarding(req, err) {
		return nil, err
	}
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return nil, err
	}
	out := &pb.QueuesReceiveResponse{}
	redelivered := 0
	for _, d := range res.Queue().Deliveries {
		out.Deliveries = append(out.Deliveries, deliveryPB(d, true))
		if d.Receives > 1 {
			redelivered++
		}
	}
	if !res.Dup { // a retry answered from its receipt received nothing new
		h.s.metrics.QueueReceived.WithLabelValues(cmd.Queue).Add(float64(len(out.Deliveries)))
		h.s.metrics.QueueRedelivered.WithLabelValues(cmd.Queue).Add(float64(redelivered))
	}
	return connect.NewResponse(out), nil
}

func (h queuesAPI) Ack(ctx context.Context, req *connect.Request[pb.QueuesAckRequest]) (*connect.Response[pb.QueuesAckResponse], error) {
	m := req.Msg
	by, err := settler(caller(ctx), m.Consumer)
	if err != nil {
		return nil, err
	}
	cmd, err := queueAckCommand(m.Queue, m.Sequence, m.Token, m.RequestId, by, caller(ctx))
	if err != nil {
		return nil, err
	}
	res, _, err := h.propose(ctx, req, cmd)
	if err != nil {
		return nil, err
	}
	h.acked(m.Queue, res)
	return connect.NewResponse(&pb.QueuesAckResponse{}), nil
}

// acked counts an ack that removed a message (not a retry answered from
// the dedup window).
func (h queuesAPI) acked(queue string, res service.Result) {
	if res.Err == nil && res.Queue() != nil && !res.Queue().SentAt.IsZero() {
		h.drain.acked(queue, 1)
		h.s.metrics.QueueAcked.WithLabelValues(queue).Inc()
		h.s.metrics.QueueLatency.WithLabelValues(queue).Observe(time.Since(res.Queue().SentAt).Seconds())
	}
}

func (h queuesAPI) Nack(ctx context.Context, req *connect.Request[pb.QueuesNackRequest]) (*connect.Response[pb.QueuesNackResponse], error) {
	cmd, err := queueNackCommand(req.Msg, caller(ctx))
	if err != nil {
		return nil, err
	}
	if _, _, err := h.propose(ctx, req, cmd); err != nil {
		return nil, err
	}
	h.s.metrics.QueueNacked.WithLabelValues(cmd.Queue).Inc()
	return connect.NewResponse(&pb.QueuesNackResponse{}), nil
}

func (h queuesAPI) Extend(ctx context.Context, req *connect.Request[pb.QueuesExtendRequest]) (*connect.Response[pb.QueuesExtendResponse], error) {
	cmd, err := queueExtendCommand(req.Msg, caller(ctx))
	if err != nil {
		return nil, err
	}
	if _, _, err := h.propose(ctx, req, cmd); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.QueuesExtendResponse{}), nil
}

func (h queuesAPI) Redrive(ctx context.Context, req *connect.Request[pb.QueuesRedriveRequest]) (*connect.Response[pb.QueuesRedriveResponse], error) {
	m, actor := req.Msg, Identity(ctx)
	if err := queueName(m.Queue); err != nil {
		return nil, err
	}
	if err := optionalRequestID(m.RequestId); err != nil {
		return nil, err
	}
	res, answered, err := h.propose(ctx, req, &service.QueueRedrive{Queue: m.Queue, Max: int(min(m.Max, 1<<30)), Actor: actor,
		RequestID: m.RequestId})
	if err != nil {
		return nil, err
	}
	if answered && !res.Dup {
		h.s.log.Info("dead letters redriven", "queue", m.Queue, "actor", actor, slog.Int("moved", res.Queue().Moved))
	}
	return connect.NewResponse(&pb.QueuesRedriveResponse{Moved: uint64(res.Queue().Moved)}), nil
}

func (h queuesAPI) DeadLetters(ctx context.Context, req *connect.Request[pb.QueuesDeadLettersRequest]) (*connect.Response[pb.QueuesDeadLettersResponse], error) {
	m := req.Msg
	if err := queueName(m.Queue); err != nil {
		return nil, err
	}
	limit, err := listLimit("limit", m.Limit, leasehold.DefaultListLimit, leasehold.MaxListLimit)
	if err != nil {
		return nil, err
	}
	if err := h.ready(); err != nil {
		return nil, err
	}
	dls, ok, err := h.svc.QueueDeadLetters(ctx, m.Queue, limit)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, queueNotFound(m.Queue)
	}
	out := &pb.QueuesDeadLettersResponse{}
	for _, dl := range dls {
		out.DeadLetters = append(out.DeadLetters, &pb.QueueDeadLetter{Sequence: dl.Seq, Key: dl.Key, Body: dl.Body,
			SentAt: timePB(dl.SentAt), Receives: dl.Receives, Note: dl.Note, DiedAt: timePB(dl.DiedAt)})
	}
	return connect.NewResponse(out), nil
}

func queueInfoPB(q service.QueueInfo, now time.Time) *pb.QueueInfo {
	s := q.Settings
	out := &pb.QueueInfo{Name: q.Name, CreatedAt: timePB(q.CreatedAt), Depth: uint64(q.Depth), InFlight: uint64(q.InFlight),
		Dead: uint64(q.Dead), Bytes: uint64(q.Bytes), Keys: uint64(q.Keys),
		Settings: &pb.QueueSettings{Visibility: durPB(s.Visibility), MaxReceives: s.MaxReceives, Retention: durPB(s.Retention),
			MaxDepth: uint64(s.MaxDepth), MaxBytes: uint64(s.MaxBytes), MaxInFlightPerConsumer: uint32(s.MaxInFlightPerConsumer),
			DedupWindow: durPB(s.DedupWindow), DeadLetter: deadLetterModePB(s.DeadLetter)}}
	if !q.OldestAt.IsZero() {
		out.OldestAt, out.OldestAge = timePB(q.OldestAt), durPB(max(0, now.Sub(q.OldestAt)))
	}
	return out
}

func deadLetterModePB(m fsm.DeadLetterMode) pb.DeadLetterMode {
	if m == service.DeadLetterBlock {
		return pb.DeadLetterMode_DEAD_LETTER_MODE_BLOCK
	}
	return pb.DeadLetterMode_DEAD_LETTER_MODE_SKIP
}

func deliveryPB(d service.Delivery, body bool) *pb.QueueDelivery {
	out := &pb.QueueDelivery{Queue: d.Queue, Key: d.Key, Sequence: d.Seq, Token: d.Token, Receives: d.Receives,
		SentAt: timePB(d.SentAt), Consumer: d.Consumer, Visibility: durPB(d.Visibility)}
	if body {
		out.Body = d.Body
	}
	return out
}
