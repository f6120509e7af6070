package server_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/server"
	"github.com/leasehold/leasehold/service"
)

// fakeQueues answers the queue handlers from the test's functions and
// records every request that reached it; the methods it does not set
// panic (the embedded nil interface), so a handler calling something
// unexpected fails its test.
type fakeQueues struct {
	service.API
	mu      sync.Mutex
	calls   []any // the requests, in order
	callers []service.Caller
	err     error // what every call answers
	recv    service.Received
	acked   []service.Acked
}

func (f *fakeQueues) record(ctx context.Context, req any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, req)
	f.callers = append(f.callers, service.CallerOf(ctx))
	return f.err
}

func (f *fakeQueues) reached() []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]any(nil), f.calls...)
}

func (f *fakeQueues) QueueSend(ctx context.Context, req *service.QueueSendRequest) ([]leasehold.Sent, error) {
	if err := f.record(ctx, req); err != nil {
		return nil, err
	}
	out := make([]leasehold.Sent, len(req.Messages))
	for i := range out {
		out[i] = leasehold.Sent{Sequence: uint64(10 + i), Duplicate: i == 1}
	}
	return out, nil
}

func (f *fakeQueues) QueueReceive(ctx context.Context, req *service.QueueReceiveRequest) (service.Received, error) {
	return f.recv, f.record(ctx, req)
}

func (f *fakeQueues) QueueAck(ctx context.Context, req *service.QueueAckRequest) (service.Acked, error) {
	return service.Acked{SentAt: time.Now().Add(-time.Second)}, f.record(ctx, req)
}

func (f *fakeQueues) QueueAckBatch(ctx context.Context, reqs []*service.QueueAckRequest) ([]service.Acked, error) {
	return f.acked, f.record(ctx, reqs)
}

func (f *fakeQueues) QueueNack(ctx context.Context, req *service.QueueNackRequest) error {
	return f.record(ctx, req)
}

func (f *fakeQueues) QueueExtend(ctx context.Context, req *service.QueueExtendRequest) error {
	return f.record(ctx, req)
}

// The queue handlers refuse what the vocabulary's limits forbid before
// anything reaches the service, with InvalidArgument naming the field; at
// a limit exactly the request passes, converted field by field (the
// delay, the visibility, the consumer name the service scopes to the
// caller, the request ID that the service turns into dedup ids).
func TestQueueHandlersValidateBeforeTheService(t *testing.T) {
	t.Parallel()
	f := &fakeQueues{}
	c := queuesClient(t, startFake(t, f).URL)
	ctx := ctxFor(t, 30*time.Second)
	d := func(v time.Duration) *durationpb.Duration { return durationpb.New(v) }
	refused := []struct {
		name  string
		call  func() error
		field string
	}{
		{"send without a key", func() error {
			_, err := c.Send(ctx, connect.NewRequest(&pb.QueuesSendRequest{Queue: "q", Body: []byte("b")}))
			return err
		}, "key"},
		{"send delayed past the limit", func() error {
			_, err := c.Send(ctx, connect.NewRequest(&pb.QueuesSendRequest{Queue: "q", Key: "k", Delay: d(leasehold.MaxQueueDelay + time.Second)}))
			return err
		}, "delay"},
		{"send of a body over the node's limit", func() error {
			_, err := c.Send(ctx, connect.NewRequest(&pb.QueuesSendRequest{Queue: "q", Key: "k", Body: make([]byte, leasehold.DefaultMaxQueueBody+1)}))
			return err
		}, "body"},
		{"batch of too many", func() error {
			ms := make([]*pb.QueueMessage, leasehold.MaxQueueBatch+1)
			for i := range ms {
				ms[i] = &pb.QueueMessage{Key: "k"}
			}
			_, err := c.SendBatch(ctx, connect.NewRequest(&pb.QueuesSendBatchRequest{Queue: "q", Messages: ms}))
			return err
		}, "messages"},
		{"receive of too many", func() error {
			_, err := c.Receive(ctx, connect.NewRequest(&pb.QueuesReceiveRequest{Queue: "q", Max: leasehold.MaxQueueBatch + 1}))
			return err
		}, "max"},
		{"receive visible too briefly", func() error {
			_, err := c.Receive(ctx, connect.NewRequest(&pb.QueuesReceiveRequest{Queue: "q", Visibility: d(leasehold.MinQueueVisibility / 2)}))
			return err
		}, "visibility"},
		{"receive waiting too long", func() error {
			_, err := c.Receive(ctx, connect.NewRequest(&pb.QueuesReceiveRequest{Queue: "q", Wait: d(leasehold.MaxQueueWait + time.Second)}))
			return err
		}, "wait"},
		{"receive for another caller's consumer", func() error {
			_, err := c.Receive(ctx, connect.NewRequest(&pb.QueuesReceiveRequest{Queue: "q", Consumer: "alice/w1"}))
			return err
		}, "consumer"},
		{"ack of no delivery", func() error {
			_, err := c.Ack(ctx, connect.NewRequest(&pb.QueuesAckRequest{Queue: "q", Sequence: 1}))
			return err
		}, "token"},
		{"nack delayed past the limit", func() error {
			_, err := c.Nack(ctx, connect.NewRequest(&pb.QueuesNackRequest{Queue: "q", Sequence: 1, Token: 2, Delay: d(leasehold.MaxQueueDelay + time.Second)}))
			return err
		}, "delay"},
		{"extend past the visibility bound", func() error {
			_, err := c.Extend(ctx, connect.NewRequest(&pb.QueuesExtendRequest{Queue: "q", Sequence: 1, Token: 2, Visibility: d(leasehold.MaxQueueVisibility + time.Second)}))
			return err
		}, "visibility"},
	}
	for _, r := range refused {
		wantCode(t, r.call(), connect.CodeInvalidArgument, r.field)
	}
	if got := f.reached(); len(got) != 0 {
		t.Fatalf("invalid requests reached the service: %+v", got)
	}

	// At the limits, each reaches the service as the request said.
	if _, err := c.Send(ctx, connect.NewRequest(&pb.QueuesSendRequest{Queue: "q", Key: "k", Body: []byte("b"),
		Delay: d(leasehold.MaxQueueDelay), RequestId: "send-1"})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Receive(ctx, connect.NewRequest(&pb.QueuesReceiveRequest{Queue: "q", Max: leasehold.MaxQueueBatch,
		Visibility: d(leasehold.MaxQueueVisibility), Wait: d(leasehold.MaxQueueWait), Consumer: "w1"})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Nack(ctx, connect.NewRequest(&pb.QueuesNackRequest{Queue: "q", Sequence: 1, Token: 2,
		Delay: d(leasehold.MaxQueueDelay), Consumer: "w1", Error: "boom"})); err != nil {
		t.Fatal(err)
	}
	got := f.reached()
	if len(got) != 3 {
		t.Fatalf("%d requests reached the service, want 3: %+v", len(got), got)
	}
	send, ok := got[0].(*service.QueueSendRequest)
	if !ok || send.Queue != "q" || len(send.Messages) != 1 || send.Messages[0].Key != "k" || string(send.Messages[0].Body) != "b" ||
		send.Messages[0].Delay != leasehold.MaxQueueDelay || send.Messages[0].DedupID != "" || send.RequestID != "send-1" {
		t.Errorf("the service got send %+v: want key k, body b, the limit's delay, the request ID and no dedup id made at the edge", got[0])
	}
	recv, ok := got[1].(*service.QueueReceiveRequest)
	if !ok || recv.Max != leasehold.MaxQueueBatch || recv.Visibility != leasehold.MaxQueueVisibility ||
		recv.Wait != leasehold.MaxQueueWait || recv.Consumer != "w1" {
		t.Errorf("the service got receive %+v", got[1])
	}
	nack, ok := got[2].(*service.QueueNackRequest)
	if !ok || nack.Sequence != 1 || nack.Token != 2 || nack.Delay != leasehold.MaxQueueDelay || nack.Consumer != "w1" || nack.Note != "boom" {
		t.Errorf("the service got nack %+v", got[2])
	}
	for _, c := range f.callers {
		if c != (service.Caller{Actor: "anonymous"}) {
			t.Errorf("the service read caller %+v from the context, want the anonymous caller of a node without auth", c)
		}
	}
}

// The service's errors reach the caller with their Connect code and
// message (the one mapping, package api): a missing queue NotFound, a
// stale token Aborted, another consumer's delivery PermissionDenied, no
// leader Unavailable; a full queue ResourceExhausted with the
// QueueRetryAfter detail and a Retry-After header; a leader the node
// cannot reach Unavailable, so the client retries; anything else Internal,
// without its text.
func TestQueueHandlersMapServiceErrors(t *testing.T) {
	t.Parallel()
	f := &fakeQueues{}
	c := queuesClient(t, startFake(t, f).URL)
	ctx := ctxFor(t, 30*time.Second)
	ack := func() error {
		_, err := c.Ack(ctx, connect.NewRequest(&pb.QueuesAckRequest{Queue: "q", Sequence: 1, Token: 2}))
		return err
	}
	for _, tc := range []struct {
		err  error
		code connect.Code
		msg  string
	}{
		{leasehold.Errorf(leasehold.CodeNotFound, "queue %q does not exist", "q"), connect.CodeNotFound, `queue "q" does not exist`},
		{leasehold.Errorf(leasehold.CodeStaleToken, "delivery 1 (token 2) is no longer in flight"), connect.CodeAborted, "no longer in flight"},
		{leasehold.Errorf(leasehold.CodePermission, "in flight to another consumer"), connect.CodePermissionDenied, "another consumer"},
		{service.NotLeader("", ""), connect.CodeUnavailable, "no leader"},
		{service.NotLeader("n2", "127.0.0.1:1"), connect.CodeUnavailable, "forwarding to the leader failed"},
		{errors.New("disk on fire at /var/lib"), connect.CodeInternal, "internal error"},
	} {
		f.mu.Lock()
		f.err = tc.err
		f.mu.Unlock()
		err := ack()
		wantCode(t, err, tc.code, tc.msg)
		if strings.Contains(err.Error(), "/var/lib") {
			t.Errorf("an internal error's text reached the caller: %v", err)
		}
	}

	f.mu.Lock()
	f.err = leasehold.Errorf(leasehold.CodeLimit, "queue %q holds 2 messages (limit max_depth 2)", "q")
	f.mu.Unlock()
	_, err := c.Send(ctx, connect.NewRequest(&pb.QueuesSendRequest{Queue: "q", Key: "k"}))
	wantCode(t, err, connect.CodeResourceExhausted, "max_depth")
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Meta().Get("Retry-After") == "" {
		t.Fatalf("a full queue's refusal %v has no Retry-After header", err)
	}
	var hint *pb.QueueRetryAfter
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			hint, _ = v.(*pb.QueueRetryAfter)
		}
	}
	if hint == nil || hint.Limit != "max_depth" || hint.RetryAfter.AsDuration() <= 0 {
		t.Fatalf("a full queue's refusal carries retry-after %v, want the max_depth limit and a hint", hint)
	}
}

// What the service answers is converted for the wire and counted: a
// Receive's deliveries (their sequence, token, receives, body and
// visibility; redeliveries counted apart, a retry's not at all), a
// SendBatch's sequences and duplicates, and an AckBatch's acks each on
// its own: a refused one carries its own error, an invalid one is
// answered without reaching the service.
func TestQueueHandlersConvertServiceResults(t *testing.T) {
	t.Parallel()
	f := &fakeQueues{recv: service.Received{Deliveries: []leasehold.Delivery{
		{Queue: "q", Key: "a", Sequence: 3, Token: 30, Receives: 1, Body: []byte("x"), Consumer: "w1", Visibility: time.Minute},
		{Queue: "q", Key: "b", Sequence: 4, Token: 31, Receives: 3, Body: []byte("y"), Consumer: "w1", Visibility: time.Minute},
	}}, acked: []service.Acked{{SentAt: time.Now()}, {Err: leasehold.Errorf(leasehold.CodeStaleToken, "no longer in flight")}}}
	n := startFake(t, f)
	c := queuesClient(t, n.URL)
	ctx := ctxFor(t, 30*time.Second)

	res, err := c.Receive(ctx, connect.NewRequest(&pb.QueuesReceiveRequest{Queue: "q", Max: 2, Consumer: "w1"}))
	if err != nil {
		t.Fatal(err)
	}
	ds := res.Msg.Deliveries
	if len(ds) != 2 || ds[0].Sequence != 3 || ds[0].Token != 30 || string(ds[0].Body) != "x" || ds[0].Visibility.AsDuration() != time.Minute ||
		ds[1].Receives != 3 || ds[1].Consumer != "w1" {
		t.Fatalf("Receive answered %v", ds)
	}
	f.mu.Lock()
	f.recv.Dup = true // a retry: answered again, counted once
	f.mu.Unlock()
	if _, err := c.Receive(ctx, connect.NewRequest(&pb.QueuesReceiveRequest{Queue: "q", Max: 2, Consumer: "w1", RequestId: "r"})); err != nil {
		t.Fatal(err)
	}

	sent, err := c.SendBatch(ctx, connect.NewRequest(&pb.QueuesSendBatchRequest{Queue: "q",
		Messages: []*pb.QueueMessage{{Key: "a"}, {Key: "b"}}}))
	if err != nil {
		t.Fatal(err)
	}
	if r := sent.Msg.Results; len(r) != 2 || r[0].Sequence != 10 || r[0].Duplicate || r[1].Sequence != 11 || !r[1].Duplicate {
		t.Fatalf("SendBatch answered %v", r)
	}

	before := len(f.reached())
	acks, err := c.AckBatch(ctx, connect.NewRequest(&pb.QueuesAckBatchRequest{Queue: "q", Consumer: "w1",
		Acks: []*pb.QueueAck{{Sequence: 3, Token: 30}, {Sequence: 5}, {Sequence: 4, Token: 31}}}))
	if err != nil {
		t.Fatal(err)
	}
	r := acks.Msg.Results
	if len(r) != 3 || r[0].Error != nil || r[1].GetError().GetLeaseholdCode() != "invalid" || r[2].GetError().GetLeaseholdCode() != "stale_token" {
		t.Fatalf("AckBatch answered %v: want the first acked, the second invalid, the third stale", r)
	}
	if got := f.reached(); len(got) != before+1 || len(got[before].([]*service.QueueAckRequest)) != 2 {
		t.Fatalf("AckBatch reached the service with %+v, want the two valid acks in one call", got[before:])
	}

	mfs, err := n.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := series(byName(mfs))
	for k, v := range map[string]float64{
		"leasehold_queue_received_total{queue=q}":    2,
		"leasehold_queue_redelivered_total{queue=q}": 1,
		"leasehold_queue_sent_total{queue=q}":        1,
		"leasehold_queue_acked_total{queue=q}":       1,
	} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

func byName(mfs []*dto.MetricFamily) map[string]*dto.MetricFamily {
	out := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// The service reads its caller from the context, which the guard fills
// from the credentials it checked: a worker's ack names the consumer by
// its bare name (the delivery's "wendy/w1" is taken as w1, the caller's
// own), and the caller the service sees is the token's, whatever the
// request body says.
func TestQueueCallerComesFromTheCredentials(t *testing.T) {
	t.Parallel()
	const workerTok = "worker-token-0123456789"
	auth, err := server.NewAuthenticator(server.AuthFile{Tokens: []server.TokenEntry{
		{Name: "wendy", SHA256: server.HashToken(workerTok), Role: "worker", Prefixes: []string{"jobs/"}}}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeQueues{}
	n := startFake(t, f, func(c *server.Config) { c.Auth = auth })
	c := leaseholdv1connect.NewQueuesClient(httpClient(t), n.URL, withToken(workerTok))
	ctx := ctxFor(t, 30*time.Second)
	if _, err := c.Ack(ctx, connect.NewRequest(&pb.QueuesAckRequest{Queue: "jobs/q", Sequence: 1, Token: 2, Consumer: "wendy/w1"})); err != nil {
		t.Fatal(err)
	}
	_, err = c.Ack(ctx, connect.NewRequest(&pb.QueuesAckRequest{Queue: "jobs/q", Sequence: 1, Token: 2, Consumer: "alice/w1"}))
	wantCode(t, err, connect.CodeInvalidArgument, "consumer")
	got := f.reached()
	if len(got) != 1 {
		t.Fatalf("%d acks reached the service, want the one of wendy's own consumer", len(got))
	}
	if a := got[0].(*service.QueueAckRequest); a.Consumer != "w1" || f.callers[0] != (service.Caller{Name: "wendy", Actor: "wendy"}) {
		t.Fatalf("the service got ack %+v from caller %+v, want consumer w1 of wendy", a, f.callers[0])
	}
}
