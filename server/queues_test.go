package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

func queuesClient(t testing.TB, url string) leaseholdv1connect.QueuesClient {
	t.Helper()
	return leaseholdv1connect.NewQueuesClient(httpClient(t), url)
}

func createQueue(t testing.TB, c leaseholdv1connect.QueuesClient, name string, set *pb.QueueSettings) {
	t.Helper()
	if _, err := c.Create(ctxFor(t, callTimeout), connect.NewRequest(&pb.QueuesCreateRequest{Queue: name, Settings: set})); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
}

func sendMsg(t testing.TB, c leaseholdv1connect.QueuesClient, queue, key, body string) uint64 {
	t.Helper()
	res, err := c.Send(ctxFor(t, callTimeout), connect.NewRequest(&pb.QueuesSendRequest{Queue: queue, Key: key, Body: []byte(body)}))
	if err != nil {
		t.Fatalf("send %s/%s: %v", queue, key, err)
	}
	return res.Msg.Sequence
}

func receive(t testing.TB, c leaseholdv1connect.QueuesClient, req *pb.QueuesReceiveRequest) []*pb.QueueDelivery {
	t.Helper()
	res, err := c.Receive(ctxFor(t, callTimeout+req.GetWait().AsDuration()), connect.NewRequest(req))
	if err != nil {
		t.Fatalf("receive %s: %v", req.Queue, err)
	}
	return res.Msg.Deliveries
}

func ack(c leaseholdv1connect.QueuesClient, ctx context.Context, d *pb.QueueDelivery) error {
	_, err := c.Ack(ctx, connect.NewRequest(&pb.QueuesAckRequest{Queue: d.Queue, Sequence: d.Sequence, Token: d.Token, Consumer: d.Consumer}))
	return err
}

// A Receive that waits is answered as soon as a message is sent, not at
// the end of its wait; one that finds nothing in its wait answers empty,
// not an error, and commits nothing while it waits (no polling).
func TestQueueLongPollWakesOnSend(t *testing.T) {
	n := startNode(t)
	c := queuesClient(t, n.URL)
	createQueue(t, c, "jobs", nil)

	before := lastIndex(n)
	if ds := receive(t, c, &pb.QueuesReceiveRequest{Queue: "jobs"}); len(ds) != 0 {
		t.Fatalf("an empty queue delivered %v", ds)
	}
	start := time.Now()
	if ds := receive(t, c, &pb.QueuesReceiveRequest{Queue: "jobs", Wait: dur(2 * time.Second)}); len(ds) != 0 {
		t.Fatalf("an empty queue delivered %v", ds)
	}
	if waited := time.Since(start); waited < 2*time.Second {
		t.Fatalf("an empty Receive answered after %v, before its 2s wait", waited)
	}
	if after := lastIndex(n); after != before {
		t.Fatalf("an empty receive and an empty long poll committed %d entries; they should commit none", after-before)
	}

	got := make(chan []*pb.QueueDelivery, 1)
	errc := make(chan error, 1)
	start = time.Now()
	go func() {
		res, err := c.Receive(ctxFor(t, 30*time.Second), connect.NewRequest(&pb.QueuesReceiveRequest{Queue: "jobs", Wait: dur(20 * time.Second)}))
		if err != nil {
			errc <- err
			return
		}
		got <- res.Msg.Deliveries
	}()
	// The Receive is waiting once it holds the queue's bell; give it a
	// moment to get there (a send before that is also fine: it then
	// finds the message at once).
	time.Sleep(200 * time.Millisecond)
	seq := sendMsg(t, c, "jobs", "k", "hello")
	select {
	case ds := <-got:
		if len(ds) != 1 || ds[0].Sequence != seq || string(ds[0].Body) != "hello" || ds[0].Token == 0 {
			t.Fatalf("the woken Receive got %v, want the message sent", ds)
		}
		if waited := time.Since(start); waited > 10*time.Second {
			t.Fatalf("the Receive was answered after %v: the send did not wake it", waited)
		}
	case err := <-errc:
		t.Fatal(err)
	case <-time.After(25 * time.Second):
		t.Fatal("the Receive was not answered")
	}
}

// A delayed message is not delivered before its delay; a Receive
// waiting for it is answered when the delay is up, not at the end of its
// wait.
func TestQueueLongPollWakesForDelayedMessage(t *testing.T) {
	n := startNode(t)
	c := queuesClient(t, n.URL)
	createQueue(t, c, "jobs", nil)
	start := time.Now()
	if _, err := c.Send(ctxFor(t, callTimeout), connect.NewRequest(&pb.QueuesSendRequest{Queue: "jobs", Key: "k",
		Body: []byte("later"), Delay: dur(2 * time.Second)})); err != nil {
		t.Fatal(err)
	}
	ds := receive(t, c, &pb.QueuesReceiveRequest{Queue: "jobs", Wait: dur(15 * time.Second)})
	waited := time.Since(start)
	if len(ds) != 1 || string(ds[0].Body) != "later" {
		t.Fatalf("the waiting Receive got %v, want the delayed message", ds)
	}
	if waited < 2*time.Second || waited > 10*time.Second {
		t.Fatalf("delivered %v after the send; want after its 2s delay and well before the 15s wait", waited)
	}
}

// A Receive waiting on a queue that is deleted answers not_found then,
// not at the end of its wait.
func TestQueueLongPollEndsOnDelete(t *testing.T) {
	n := startNode(t)
	c := queuesClient(t, n.URL)
	createQueue(t, c, "jobs", nil)
	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := c.Receive(ctxFor(t, 30*time.Second), connect.NewRequest(&pb.QueuesReceiveRequest{Queue: "jobs", Wait: dur(20 * time.Second)}))
		errc <- err
	}()
	time.Sleep(200 * time.Millisecond) // let it wait (a delete before that is also answered not_found)
	if _, err := c.Delete(ctxFor(t, callTimeout), connect.NewRequest(&pb.QueuesDeleteRequest{Queue: "jobs", Reason: "test"})); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		wantCode(t, err, connect.CodeNotFound, `"jobs"`)
		if waited := time.Since(start); waited > 10*time.Second {
			t.Fatalf("answered after %v: the delete did not wake it", waited)
		}
	case <-time.After(25 * time.Second):
		t.Fatal("the Receive was not answered")
	}
}

// A delivery not acked within its visibility is delivered again (not
// before), with a larger token; an Ack with the old token is refused as
// stale, and the new one is taken.
func TestQueueVisibilityExpiryRedelivers(t *testing.T) {
	n := startNode(t)
	c := queuesClient(t, n.URL)
	createQueue(t, c, "jobs", nil)
	sendMsg(t, c, "jobs", "k", "m1")

	start := time.Now()
	first := receive(t, c, &pb.QueuesReceiveRequest{Queue: "jobs", Visibility: dur(2 * time.Second)})
	if len(first) != 1 || first[0].Receives != 1 {
		t.Fatalf("first receive: %v", first)
	}
	var again []*pb.QueueDelivery
	deadline := time.Now().Add(20 * time.Second)
	for len(again) == 0 && time.Now().Before(deadline) {
		again = receive(t, c, &pb.QueuesReceiveRequest{Queue: "jobs", Wait: dur(5 * time.Second)})
	}
	if len(again) != 1 {
		t.Fatal("the message was not delivered again after its visibility")
	}
	if early := time.Since(start); early < 2*time.Second {
		t.Fatalf("redelivered after %v, before the 2s visibility ran out", early)
	}
	d := again[0]
	if d.Sequence != first[0].Sequence || d.Token <= first[0].Token || d.Receives != 2 {
		t.Fatalf("redelivery %v; want sequence %d with a token above %d and receives 2", d, first[0].Sequence, first[0].Token)
	}
	err := ack(c, ctxFor(t, callTimeout), first[0])
	wantCode(t, err, connect.CodeAborted, "no longer in flight")
	var ce *connect.Error
	if errors.As(err, &ce); ce.Meta().Get("Leasehold-Error-Code") != "stale_token" {
		t.Fatalf("stale ack's Leasehold-Error-Code is %q, want stale_token", ce.Meta().Get("Leasehold-Error-Code"))
	}
	if err := ack(c, ctxFor(t, callTimeout), d); err != nil {
		t.Fatalf("ack with the current token: %v", err)
	}
}

// An Extend restarts a delivery's countdown: the deadline of its first
// visibility passes without a redelivery (that timer is stale), and the
// extended one expires it.
func TestQueueExtendPostponesRedelivery(t *testing.T) {
	n := startNode(t)
	c := queuesClient(t, n.URL)
	createQueue(t, c, "jobs", nil)
	sendMsg(t, c, "jobs", "k", "m1")
	start := time.Now()
	d := receive(t, c, &pb.QueuesReceiveRequest{Queue: "jobs", Visibility: dur(2 * time.Second)})[0]
	if _, err := c.Extend(ctxFor(t, callTimeout), connect.NewRequest(&pb.QueuesExtendRequest{Queue: "jobs",
		Sequence: d.Sequence, Token: d.Token, Visibility: dur(6 * time.Second), Progress: "half done"})); err != nil {
		t.Fatal(err)
	}
	// Past the first deadline (2s), well before the extended one (6s).
	if ds := receive(t, c, &pb.QueuesReceiveRequest{Queue: "jobs", Wait: dur(time.Until(start.Add(4 * time.Second)))}); len(ds) != 0 {
		t.Fatalf("redelivered %v after %v, before the extended visibility ran out", ds, time.Since(start))
	}
	var again []*pb.QueueDelivery
	deadline := time.Now().Add(20 * time.Second)
	for len(again) == 0 && time.Now().Before(deadline) {
		again = receive(t, c, &pb.QueuesReceiveRequest{Queue: "jobs", Wait: dur(5 * time.Second)})
	}
	if len(again) != 1 || again[0].Token <= d.Token {
		t.Fatalf("after the extended visibility: %v, want a redelivery with a larger token", again)
	}
}

// A message nacked max_receives times becomes a dead letter with its
// error note; its key goes on to the next message (skip, the default);
// Redrive puts it back and it is delivered again.
func TestQueueDeadLetterAndRedrive(t *testing.T) {
	n := startNode(t)
	c := queuesClient(t, n.URL)
	createQueue(t, c, "jobs", &pb.QueueSettings{MaxReceives: 2})
	poison := sendMsg(t, c, "jobs", "k", "poison")
	next := sendMsg(t, c, "jobs", "k", "next")
	for i := range 2 {
		ds := receive(t, c, &pb.QueuesReceiveRequest{Queue: "jobs"})
		if len(ds) != 1 || ds[0].Sequence != poison {
			t.Fatalf("receive %d: %v, want the poison message", i+1, ds)
		}
		if _, err := c.Nack(ctxFor(t, callTimeout), connect.NewRequest(&pb.QueuesNackRequest{Queue: "jobs",
			Sequence: ds[0].Sequence, Token: ds[0].Token, Error: "bad input"})); err != nil {
			t.Fatal(err)
		}
	}
	dls, err := c.DeadLetters(ctxFor(t, callTimeout), connect.NewRequest(&pb.QueuesDeadLettersRequest{Queue: "jobs"}))
	if err != nil {
		t.Fatal(err)
	}
	if l := dls.Msg.DeadLetters; len(l) != 1 || l[0].Sequence != poison || l[0].Note != "bad input" || l[0].Receives != 2 || string(l[0].Body) != "poison" {
		t.Fatalf("dead letters %v, want the poison message with its note", l)
	}
	ds := receive(t, c, &pb.QueuesReceiveRequest{Queue: "jobs"})
	if len(ds) != 1 || ds[0].Sequence != next {
		t.Fatalf("after the dead letter the key delivered %v, want the next message", ds)
	}
	if err := ack(c, ctxFor(t, callTimeout), ds[0]); err != nil {
		t.Fatal(err)
	}
	rd, err := c.Redrive(ctxFor(t, callTimeout), connect.NewRequest(&pb.QueuesRedriveRequest{Queue: "jobs"}))
	if err != nil || rd.Msg.Moved != 1 {
		t.Fatalf("redrive: %v, %v; want 1 moved", rd, err)
	}
	ds = receive(t, c, &pb.QueuesReceiveRequest{Queue: "jobs"})
	if len(ds) != 1 || ds[0].Sequence != poison {
		t.Fatalf("after the redrive: %v, want the poison message again", ds)
	}
}

// A Send past a queue's depth is refused with resource_exhausted, a
// QueueRetryAfter detail and a Retry-After header; once a consumer acks,
// sends are taken again, and every message accepted is delivered.
func TestQueueBackpressure(t *testing.T) {
	n := startNode(t)
	c := queuesClient(t, n.URL)
	createQueue(t, c, "jobs", &pb.QueueSettings{MaxDepth: 3})
	accepted := map[uint64]bool{}
	for i := range 3 {
		accepted[sendMsg(t, c, "jobs", "k"+string(rune('a'+i)), "m")] = true
	}
	_, err := c.Send(ctxFor(t, callTimeout), connect.NewRequest(&pb.QueuesSendRequest{Queue: "jobs", Key: "kd", Body: []byte("m")}))
	wantCode(t, err, connect.CodeResourceExhausted, "max_depth 3")
	var ce *connect.Error
	errors.As(err, &ce)
	if ce.Meta().Get("Retry-After") != "1" {
		t.Errorf("Retry-After header %q, want 1", ce.Meta().Get("Retry-After"))
	}
	var hint *pb.QueueRetryAfter
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if h, ok := v.(*pb.QueueRetryAfter); ok {
				hint = h
			}
		}
	}
	if hint == nil || hint.RetryAfter.AsDuration() < time.Second || hint.Limit != "max_depth" {
		t.Fatalf("retry-after detail %v, want at least 1s for max_depth", hint)
	}
	// A batch is all or none: refused whole.
	_, err = c.SendBatch(ctxFor(t, callTimeout), connect.NewRequest(&pb.QueuesSendBatchRequest{Queue: "jobs",
		Messages: []*pb.QueueMessage{{Key: "x", Body: []byte("m")}}}))
	wantCode(t, err, connect.CodeResourceExhausted)

	ds := receive(t, c, &pb.QueuesReceiveRequest{Queue: "jobs", Max: 1})
	if err := ack(c, ctxFor(t, callTimeout), ds[0]); err != nil {
		t.Fatal(err)
	}
	delivered := map[uint64]bool{ds[0].Sequence: true}
	accepted[sendMsg(t, c, "jobs", "kd", "m")] = true
	for len(delivered) < len(accepted) {
		ds := receive(t, c, &pb.QueuesReceiveRequest{Queue: "jobs", Max: 10, Wait: dur(2 * time.Second)})
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			delivered[d.Sequence] = true
			if err := ack(c, ctxFor(t, callTimeout), d); err != nil {
				t.Fatal(err)
			}
		}
	}
	for seq := range accepted {
		if !delivered[seq] {
			t.Errorf("message %d was accepted and never delivered", seq)
		}
	}
}

// A Receive is capped to its consumer's room under
// max_in_flight_per_consumer and refused when there is none; another
// consumer name of the same caller has its own allowance.
func TestQueueMaxInFlightPerConsumer(t *testing.T) {
	n := startNode(t)
	c := queuesClient(t, n.URL)
	createQueue(t, c, "jobs", &pb.QueueSettings{MaxInFlightPerConsumer: 2})
	for _, k := range []string{"a", "b", "c", "d"} {
		sendMsg(t, c, "jobs", k, "m")
	}
	ds := receive(t, c, &pb.QueuesReceiveRequest{Queue: "jobs", Max: 5, Consumer: "w1"})
	if len(ds) != 2 || ds[0].Consumer != "w1" {
		t.Fatalf("a receive of 5 with room for 2 got %v", ds)
	}
	_, err := c.Receive(ctxFor(t, callTimeout), connect.NewRequest(&pb.QueuesReceiveRequest{Queue: "jobs", Consumer: "w1"}))
	wantCode(t, err, connect.CodeResourceExhausted, "max_in_flight_per_consumer 2")
	if ds := receive(t, c, &pb.QueuesReceiveRequest{Queue: "jobs", Max: 5, Consumer: "w2"}); len(ds) != 2 {
		t.Fatalf("another consumer got %d, want 2", len(ds))
	}
	if err := ack(c, ctxFor(t, callTimeout), ds[0]); err != nil {
		t.Fatal(err)
	}
	sendMsg(t, c, "jobs", "e", "m")
	if ds := receive(t, c, &pb.QueuesReceiveRequest{Queue: "jobs", Max: 5, Consumer: "w1"}); len(ds) != 1 {
		t.Fatalf("after an ack the consumer got %d, want 1", len(ds))
	}
}

// A retried Send with the same request_id, or the same dedup_id, enqueues
// nothing and answers the first sequence.
func TestQueueSendRetryEnqueuesOnce(t *testing.T) {
	n := startNode(t)
	c := queuesClient(t, n.URL)
	createQueue(t, c, "jobs", nil)
	for _, req := range []*pb.QueuesSendRequest{
		{Queue: "jobs", Key: "k", Body: []byte("a"), RequestId: "req-1"},
		{Queue: "jobs", Key: "k", Body: []byte("b"), DedupId: "order-7"},
	} {
		first, err := c.Send(ctxFor(t, callTimeout), connect.NewRequest(req))
		if err != nil {
			t.Fatal(err)
		}
		again, err := c.Send(ctxFor(t, callTimeout), connect.NewRequest(req))
		if err != nil {
			t.Fatal(err)
		}
		if again.Msg.Sequence != first.Msg.Sequence || !again.Msg.Duplicate || first.Msg.Duplicate {
			t.Fatalf("retry answered %v after %v; want the first sequence as a duplicate", again.Msg, first.Msg)
		}
	}
	info, err := c.Get(ctxFor(t, callTimeout), connect.NewRequest(&pb.QueuesGetRequest{Queue: "jobs"}))
	if err != nil {
		t.Fatal(err)
	}
	if info.Msg.Queue.Depth != 2 {
		t.Fatalf("depth %d after two sends retried once each, want 2", info.Msg.Queue.Depth)
	}
}

// Purge and delete need a reason, and are in the audit log with the
// actor and the reason.
func TestQueuePurgeDeleteAudited(t *testing.T) {
	n := startNode(t)
	c := queuesClient(t, n.URL)
	admin := leaseholdv1connect.NewAdminClient(httpClient(t), n.URL)
	createQueue(t, c, "jobs", nil)
	sendMsg(t, c, "jobs", "k", "a")
	sendMsg(t, c, "jobs", "j", "b")

	_, err := c.Purge(ctxFor(t, callTimeout), connect.NewRequest(&pb.QueuesPurgeRequest{Queue: "jobs"}))
	wantCode(t, err, connect.CodeInvalidArgument, "reason")
	res, err := c.Purge(ctxFor(t, callTimeout), connect.NewRequest(&pb.QueuesPurgeRequest{Queue: "jobs", Reason: "bad deploy"}))
	if err != nil || res.Msg.Dropped != 2 {
		t.Fatalf("purge: %v, %v; want 2 dropped", res, err)
	}
	if _, err := c.Delete(ctxFor(t, callTimeout), connect.NewRequest(&pb.QueuesDeleteRequest{Queue: "jobs", Reason: "retired"})); err != nil {
		t.Fatal(err)
	}
	_, err = c.Get(ctxFor(t, callTimeout), connect.NewRequest(&pb.QueuesGetRequest{Queue: "jobs"}))
	wantCode(t, err, connect.CodeNotFound, `"jobs"`)
	recs := auditLog(t, admin, &pb.AuditRequest{Since: dur(time.Hour)}).Records
	want := map[string]string{"queue-purge": "bad deploy", "queue-delete": "retired"}
	for _, r := range recs {
		if reason, ok := want[r.Action]; ok && r.Resource == "jobs" && r.Reason == reason && r.Actor == "anonymous" {
			delete(want, r.Action)
		}
	}
	if len(want) != 0 {
		t.Fatalf("audit log %v lacks %v", recs, want)
	}
}

// Each bad input is refused at the edge with invalid_argument (or
// not_found) and a message naming the field and its limit.
func TestQueueValidation(t *testing.T) {
	n := startNode(t)
	c := queuesClient(t, n.URL)
	createQueue(t, c, "jobs", nil)
	big := make([]byte, 256<<10+1)
	tooMany := make([]*pb.QueueMessage, 101)
	for i := range tooMany {
		tooMany[i] = &pb.QueueMessage{Key: "k", Body: []byte("m")}
	}
	long := strings.Repeat("k", 257)
	ctx := func() context.Context { return ctxFor(t, callTimeout) }
	cases := []struct {
		name string
		call func() error
		code connect.Code
		says []string
	}{
		{"queue name empty", func() error {
			_, err := c.Send(ctx(), connect.NewRequest(&pb.QueuesSendRequest{Key: "k"}))
			return err
		}, connect.CodeInvalidArgument, []string{"queue must not be empty"}},
		{"queue name control char", func() error {
			_, err := c.Create(ctx(), connect.NewRequest(&pb.QueuesCreateRequest{Queue: "a\nb"}))
			return err
		}, connect.CodeInvalidArgument, []string{"queue", "non-printable"}},
		{"key too long", func() error {
			_, err := c.Send(ctx(), connect.NewRequest(&pb.QueuesSendRequest{Queue: "jobs", Key: long}))
			return err
		}, connect.CodeInvalidArgument, []string{"key", "257", "256"}},
		{"key empty", func() error {
			_, err := c.Send(ctx(), connect.NewRequest(&pb.QueuesSendRequest{Queue: "jobs"}))
			return err
		}, connect.CodeInvalidArgument, []string{"key must not be empty"}},
		{"body too large", func() error {
			_, err := c.Send(ctx(), connect.NewRequest(&pb.QueuesSendRequest{Queue: "jobs", Key: "k", Body: big}))
			return err
		}, connect.CodeInvalidArgument, []string{"body", "262145", "262144"}},
		{"batch too large", func() error {
			_, err := c.SendBatch(ctx(), connect.NewRequest(&pb.QueuesSendBatchRequest{Queue: "jobs", Messages: tooMany}))
			return err
		}, connect.CodeInvalidArgument, []string{"messages", "101", "100"}},
		{"batch empty", func() error {
			_, err := c.SendBatch(ctx(), connect.NewRequest(&pb.QueuesSendBatchRequest{Queue: "jobs"}))
			return err
		}, connect.CodeInvalidArgument, []string{"messages", "1 to 100"}},
		{"batch message key", func() error {
			_, err := c.SendBatch(ctx(), connect.NewRequest(&pb.QueuesSendBatchRequest{Queue: "jobs",
				Messages: []*pb.QueueMessage{{Key: "k"}, {Key: ""}}}))
			return err
		}, connect.CodeInvalidArgument, []string{"messages[1].key"}},
		{"delay too long", func() error {
			_, err := c.Send(ctx(), connect.NewRequest(&pb.QueuesSendRequest{Queue: "jobs", Key: "k", Delay: dur(16 * time.Minute)}))
			return err
		}, connect.CodeInvalidArgument, []string{"delay", "15m0s"}},
		{"visibility too short", func() error {
			_, err := c.Receive(ctx(), connect.NewRequest(&pb.QueuesReceiveRequest{Queue: "jobs", Visibility: dur(500 * time.Millisecond)}))
			return err
		}, connect.CodeInvalidArgument, []string{"visibility", "1s", "12h0m0s"}},
		{"visibility too long", func() error {
			_, err := c.Receive(ctx(), connect.NewRequest(&pb.QueuesReceiveRequest{Queue: "jobs", Visibility: dur(13 * time.Hour)}))
			return err
		}, connect.CodeInvalidArgument, []string{"visibility", "12h0m0s"}},
		{"wait too long", func() error {
			_, err := c.Receive(ctx(), connect.NewRequest(&pb.QueuesReceiveRequest{Queue: "jobs", Wait: dur(21 * time.Second)}))
			return err
		}, connect.CodeInvalidArgument, []string{"wait", "20s"}},
		{"max too large", func() error {
			_, err := c.Receive(ctx(), connect.NewRequest(&pb.QueuesReceiveRequest{Queue: "jobs", Max: 101}))
			return err
		}, connect.CodeInvalidArgument, []string{"max", "100"}},
		{"consumer with a slash", func() error {
			_, err := c.Receive(ctx(), connect.NewRequest(&pb.QueuesReceiveRequest{Queue: "jobs", Consumer: "a/b"}))
			return err
		}, connect.CodeInvalidArgument, []string{"consumer"}},
		{"ack without token", func() error {
			_, err := c.Ack(ctx(), connect.NewRequest(&pb.QueuesAckRequest{Queue: "jobs", Sequence: 1}))
			return err
		}, connect.CodeInvalidArgument, []string{"sequence and token"}},
		{"extend visibility missing", func() error {
			_, err := c.Extend(ctx(), connect.NewRequest(&pb.QueuesExtendRequest{Queue: "jobs", Sequence: 1, Token: 1}))
			return err
		}, connect.CodeInvalidArgument, []string{"visibility", "1s"}},
		{"nack delay too long", func() error {
			_, err := c.Nack(ctx(), connect.NewRequest(&pb.QueuesNackRequest{Queue: "jobs", Sequence: 1, Token: 1, Delay: dur(time.Hour)}))
			return err
		}, connect.CodeInvalidArgument, []string{"delay", "15m0s"}},
		{"settings visibility", func() error {
			_, err := c.Create(ctx(), connect.NewRequest(&pb.QueuesCreateRequest{Queue: "q2", Settings: &pb.QueueSettings{Visibility: dur(13 * time.Hour)}}))
			return err
		}, connect.CodeInvalidArgument, []string{"settings.visibility", "12h0m0s"}},
		{"settings max receives", func() error {
			_, err := c.Create(ctx(), connect.NewRequest(&pb.QueuesCreateRequest{Queue: "q2", Settings: &pb.QueueSettings{MaxReceives: 1001}}))
			return err
		}, connect.CodeInvalidArgument, []string{"settings.max_receives", "1000"}},
		{"settings dead letter mode", func() error {
			_, err := c.Create(ctx(), connect.NewRequest(&pb.QueuesCreateRequest{Queue: "q2", Settings: &pb.QueueSettings{DeadLetter: 7}}))
			return err
		}, connect.CodeInvalidArgument, []string{"settings.dead_letter"}},
		{"create with other settings", func() error {
			_, err := c.Create(ctx(), connect.NewRequest(&pb.QueuesCreateRequest{Queue: "jobs", Settings: &pb.QueueSettings{MaxReceives: 9}}))
			return err
		}, connect.CodeAlreadyExists, []string{"other settings"}},
		{"send to a missing queue", func() error {
			_, err := c.Send(ctx(), connect.NewRequest(&pb.QueuesSendRequest{Queue: "nope", Key: "k"}))
			return err
		}, connect.CodeNotFound, []string{`"nope"`}},
		{"list limit", func() error {
			_, err := c.List(ctx(), connect.NewRequest(&pb.QueuesListRequest{Limit: 1001}))
			return err
		}, connect.CodeInvalidArgument, []string{"limit", "1000"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantCode(t, tc.call(), tc.code, tc.says...) })
	}
}
