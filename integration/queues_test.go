package integration

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/internal/testcluster"
)

func rawQueues(t testing.TB, url string) leaseholdv1connect.QueuesClient {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return leaseholdv1connect.NewQueuesClient(&http.Client{Transport: tr}, url)
}

// A delivery in flight when the leader dies is delivered again by the
// new leader after its visibility, counted from the takeover: not lost,
// not early.
func TestQueueVisibilitySurvivesLeaderChange(t *testing.T) {
	cl := testcluster.Start(t, 3)
	old := cl.WaitLeader(15 * time.Second)
	c := rawQueues(t, cl.URL(old))
	if _, err := c.Create(ctxFor(t, 10*time.Second), connect.NewRequest(&pb.QueuesCreateRequest{Queue: "jobs"})); err != nil {
		t.Fatal(err)
	}
	sent, err := c.Send(ctxFor(t, 10*time.Second), connect.NewRequest(&pb.QueuesSendRequest{Queue: "jobs", Key: "k", Body: []byte("m1")}))
	if err != nil {
		t.Fatal(err)
	}
	seq := sent.Msg.Sequence
	const vis = 4 * time.Second
	res, err := c.Receive(ctxFor(t, 10*time.Second), connect.NewRequest(&pb.QueuesReceiveRequest{Queue: "jobs", Visibility: durationpb.New(vis)}))
	if err != nil || len(res.Msg.Deliveries) != 1 {
		t.Fatalf("first receive: %v, %v", res, err)
	}
	first := res.Msg.Deliveries
	delivered := time.Now()
	cl.Kill(old)
	nl := cl.WaitNewLeader(old, 20*time.Second)
	took := time.Now()
	c = rawQueues(t, cl.URL(nl))

	var again []*pb.QueueDelivery
	deadline := time.Now().Add(40 * time.Second)
	for len(again) == 0 && time.Now().Before(deadline) {
		res, err := c.Receive(ctxFor(t, 30*time.Second), connect.NewRequest(&pb.QueuesReceiveRequest{Queue: "jobs", Wait: durationpb.New(5 * time.Second)}))
		if err != nil {
			if connect.CodeOf(err) == connect.CodeUnavailable {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			t.Fatal(err)
		}
		again = res.Msg.Deliveries
	}
	if len(again) != 1 {
		t.Fatal("the delivery in flight at the leader's death was never delivered again: lost")
	}
	if at := time.Since(delivered); at < vis {
		t.Fatalf("redelivered %v after the first delivery, before its %v visibility", at, vis)
	}
	if at := time.Since(took); at < vis-time.Second { // the new leader counts from its takeover
		t.Fatalf("redelivered %v after the takeover; the countdown restarts there (%v)", at, vis)
	}
	if d := again[0]; d.Sequence != seq || d.Token <= first[0].Token || d.Receives != 2 {
		t.Fatalf("redelivery %v, want sequence %d with a larger token than %d", d, seq, first[0].Token)
	}
	ack := func(d *pb.QueueDelivery) error {
		_, err := c.Ack(ctxFor(t, 10*time.Second), connect.NewRequest(&pb.QueuesAckRequest{Queue: d.Queue, Sequence: d.Sequence, Token: d.Token}))
		return err
	}
	if err := ack(first[0]); connect.CodeOf(err) != connect.CodeAborted {
		t.Fatalf("ack with the first delivery's token: %v, want aborted (stale token)", err)
	}
	if err := ack(again[0]); err != nil {
		t.Fatal(err)
	}
}

// Through a follower (which forwards to the leader) a long poll is
// answered by a send, a Send refused for backpressure carries the
// retry-after detail and header, and an error keeps leasehold's own code
// (connect-go drops the headers of an error it read off the wire); an
// AckBatch is forwarded too.
func TestQueueThroughFollower(t *testing.T) {
	cl := testcluster.Start(t, 3)
	leader := cl.WaitLeader(15 * time.Second)
	c := rawQueues(t, cl.URL((leader+1)%3))
	if _, err := c.Create(ctxFor(t, 10*time.Second), connect.NewRequest(&pb.QueuesCreateRequest{Queue: "jobs",
		Settings: &pb.QueueSettings{MaxDepth: 1}})); err != nil {
		t.Fatal(err)
	}
	got := make(chan *pb.QueuesReceiveResponse, 1)
	go func() {
		res, err := c.Receive(ctxFor(t, 30*time.Second), connect.NewRequest(&pb.QueuesReceiveRequest{Queue: "jobs", Wait: durationpb.New(20 * time.Second)}))
		if err != nil {
			t.Error(err)
			got <- nil
			return
		}
		got <- res.Msg
	}()
	time.Sleep(200 * time.Millisecond)
	if _, err := c.Send(ctxFor(t, 10*time.Second), connect.NewRequest(&pb.QueuesSendRequest{Queue: "jobs", Key: "k", Body: []byte("m")})); err != nil {
		t.Fatal(err)
	}
	var delivered *pb.QueueDelivery
	select {
	case res := <-got:
		if res == nil || len(res.Deliveries) != 1 {
			t.Fatalf("the long poll through a follower got %v", res)
		}
		delivered = res.Deliveries[0]
	case <-time.After(25 * time.Second):
		t.Fatal("the long poll through a follower was not answered")
	}
	_, err := c.Send(ctxFor(t, 10*time.Second), connect.NewRequest(&pb.QueuesSendRequest{Queue: "jobs", Key: "k2", Body: []byte("m")}))
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted {
		t.Fatalf("a send past max_depth through a follower: %v, want resource_exhausted", err)
	}
	var hint *pb.QueueRetryAfter
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			hint, _ = v.(*pb.QueueRetryAfter)
		}
	}
	if hint == nil || hint.Limit != "max_depth" || ce.Meta().Get("Retry-After") != "1" {
		t.Fatalf("through a follower: detail %v, Retry-After %q; want the max_depth hint and 1", hint, ce.Meta().Get("Retry-After"))
	}
	// leasehold's own code comes through too: a stale token, not a lost
	// compare-and-swap (both are Aborted).
	_, err = c.Ack(ctxFor(t, 10*time.Second), connect.NewRequest(&pb.QueuesAckRequest{Queue: "jobs", Sequence: 1, Token: 1}))
	if !errors.As(err, &ce) || ce.Code() != connect.CodeAborted || ce.Meta().Get("Leasehold-Error-Code") != "stale_token" {
		t.Fatalf("a stale ack through a follower: %v (Leasehold-Error-Code %q), want aborted, stale_token", err, ce.Meta().Get("Leasehold-Error-Code"))
	}
	// An AckBatch is forwarded like an Ack: the delivery is acked, and the
	// room it frees takes the next send.
	batch, err := c.AckBatch(ctxFor(t, 10*time.Second), connect.NewRequest(&pb.QueuesAckBatchRequest{Queue: "jobs",
		Acks: []*pb.QueueAck{{Sequence: delivered.Sequence, Token: delivered.Token}}}))
	if err != nil || batch.Msg.Results[0].GetError() != nil {
		t.Fatalf("an AckBatch through a follower: %v, %v", batch, err)
	}
	if _, err := c.Send(ctxFor(t, 10*time.Second), connect.NewRequest(&pb.QueuesSendRequest{Queue: "jobs", Key: "k2", Body: []byte("m")})); err != nil {
		t.Fatalf("a send after the batch acked the only message: %v", err)
	}
}
