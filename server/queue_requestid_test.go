package server_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// A request_id reused for another message is no retry: it is refused with
// invalid_argument, without the first message's sequence, and nothing of
// it is enqueued. Before, it was answered as a duplicate of the first and
// the second message was silently dropped.
func TestQueueSendReusedRequestIDIsRefused(t *testing.T) {
	n := startNode(t)
	c := queuesClient(t, n.URL)
	createQueue(t, c, "jobs", nil)
	send := func(req *pb.QueuesSendRequest) (*pb.QueuesSendResponse, error) {
		res, err := c.Send(ctxFor(t, callTimeout), connect.NewRequest(req))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}
	first, err := send(&pb.QueuesSendRequest{Queue: "jobs", Key: "k", Body: []byte("a"), RequestId: "req-1"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := send(&pb.QueuesSendRequest{Queue: "jobs", Key: "k", Body: []byte("a"), RequestId: "req-1"})
	if err != nil || !again.Duplicate || again.Sequence != first.Sequence {
		t.Fatalf("the same send retried: %v %v, want the first sequence %d as a duplicate", again, err, first.Sequence)
	}
	for name, req := range map[string]*pb.QueuesSendRequest{
		"another body":  {Queue: "jobs", Key: "k", Body: []byte("b"), RequestId: "req-1"},
		"another key":   {Queue: "jobs", Key: "k2", Body: []byte("a"), RequestId: "req-1"},
		"another delay": {Queue: "jobs", Key: "k", Body: []byte("a"), Delay: dur(5e9), RequestId: "req-1"},
	} {
		res, err := send(req)
		wantCode(t, err, connect.CodeInvalidArgument, "request_id", "another message")
		if res != nil {
			t.Fatalf("%s: answered %v", name, res)
		}
	}
	// The batch version: a retry answers as the first did; a batch of
	// other messages (or another count) under its request_id is refused.
	batch := func(bodies ...string) (*pb.QueuesSendBatchResponse, error) {
		req := &pb.QueuesSendBatchRequest{Queue: "jobs", RequestId: "batch-1"}
		for _, b := range bodies {
			req.Messages = append(req.Messages, &pb.QueueMessage{Key: "b/" + b, Body: []byte(b)})
		}
		res, err := c.SendBatch(ctxFor(t, callTimeout), connect.NewRequest(req))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}
	b1, err := batch("x", "y", "z")
	if err != nil {
		t.Fatal(err)
	}
	b2, err := batch("x", "y", "z")
	if err != nil {
		t.Fatal(err)
	}
	for i := range b1.Results {
		if !b2.Results[i].Duplicate || b2.Results[i].Sequence != b1.Results[i].Sequence {
			t.Fatalf("retried batch answered %v, want %v as duplicates", b2.Results, b1.Results)
		}
	}
	_, err = batch("x", "y", "w")
	wantCode(t, err, connect.CodeInvalidArgument, "request_id", "messages[2]")
	_, err = batch("x", "y")
	wantCode(t, err, connect.CodeInvalidArgument, "request_id")
	_, err = batch("x", "y", "z", "v")
	wantCode(t, err, connect.CodeInvalidArgument, "request_id")
	if d := queueDepth(t, c, "jobs"); d != 4 {
		t.Fatalf("depth %d, want 4: one send and one batch of 3, nothing of the refused ones", d)
	}
}

// Two callers may pick the same request_id: each gets its own message
// enqueued, and neither learns of the other's.
func TestQueueSendRequestIDIsScopedToTheCaller(t *testing.T) {
	n := authNode(t)
	hc := httpClient(t)
	admin := leaseholdv1connect.NewQueuesClient(hc, n.URL, withToken(adminToken))
	worker := leaseholdv1connect.NewQueuesClient(hc, n.URL, withToken(workerToken))
	createQueue(t, admin, "jobs/q", nil)
	var seqs []uint64
	for _, c := range []leaseholdv1connect.QueuesClient{admin, worker} {
		res, err := c.Send(ctxFor(t, callTimeout), connect.NewRequest(&pb.QueuesSendRequest{Queue: "jobs/q", Key: "k", Body: []byte("same"), RequestId: "r"}))
		if err != nil {
			t.Fatal(err)
		}
		if res.Msg.Duplicate {
			t.Fatalf("a second caller's send with the same request_id was taken for a duplicate: %v", res.Msg)
		}
		seqs = append(seqs, res.Msg.Sequence)
	}
	if seqs[0] == seqs[1] || queueDepth(t, admin, "jobs/q") != 2 {
		t.Fatalf("sequences %v: want two messages", seqs)
	}
}

func queueDepth(t testing.TB, c leaseholdv1connect.QueuesClient, queue string) uint64 {
	t.Helper()
	info, err := c.Get(ctxFor(t, callTimeout), connect.NewRequest(&pb.QueuesGetRequest{Queue: queue}))
	if err != nil {
		t.Fatal(err)
	}
	return info.Msg.Queue.Depth
}

// A Receive retried with its request_id while nothing else is ready (so
// the node would otherwise answer empty, or wait) is answered at once with
// the first attempt's delivery and token; a new request_id gets nothing.
func TestQueueReceiveRetryWithNothingElseReady(t *testing.T) {
	n := startNode(t)
	c := queuesClient(t, n.URL)
	createQueue(t, c, "jobs", nil)
	sendMsg(t, c, "jobs", "k", "m")
	req := &pb.QueuesReceiveRequest{Queue: "jobs", Consumer: "w1", RequestId: "rcv-1"}
	first := receive(t, c, req)
	if len(first) != 1 {
		t.Fatalf("first receive: %v", first)
	}
	for _, wait := range []int64{0, 5e9} {
		req.Wait = dur(time.Duration(wait))
		start := time.Now()
		again := receive(t, c, req)
		if len(again) != 1 || again[0].Sequence != first[0].Sequence || again[0].Token != first[0].Token {
			t.Fatalf("the retry (wait %v): %v, want the first delivery %v", req.Wait.AsDuration(), again, first[0])
		}
		if took := time.Since(start); took > 4*time.Second {
			t.Fatalf("the retry waited %v for a message instead of answering its own", took)
		}
	}
	if other := receive(t, c, &pb.QueuesReceiveRequest{Queue: "jobs", Consumer: "w1", RequestId: "rcv-2"}); len(other) != 0 {
		t.Fatalf("a new request_id got %v, want nothing (the only message is in flight)", other)
	}
}
