package server_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
)

// AckBatch answers each ack on its own: good ones are acked, a stale
// token is aborted and a bad sequence invalid, without failing the rest;
// a retry with the same request ids is answered as the first was. A batch
// of none or of more than 100, or a bad consumer name, is refused whole.
func TestQueueAckBatch(t *testing.T) {
	n := startNode(t)
	c := queuesClient(t, n.URL)
	createQueue(t, c, "jobs", nil)
	for _, k := range []string{"a", "b", "c"} {
		sendMsg(t, c, "jobs", k, "m")
	}
	ds := receive(t, c, &pb.QueuesReceiveRequest{Queue: "jobs", Max: 3, Consumer: "w1"})
	if len(ds) != 3 {
		t.Fatalf("received %v", ds)
	}
	req := &pb.QueuesAckBatchRequest{Queue: "jobs", Consumer: "w1", Acks: []*pb.QueueAck{
		{Sequence: ds[0].Sequence, Token: ds[0].Token, RequestId: "a0"},
		{Sequence: ds[1].Sequence, Token: ds[1].Token + 1000, RequestId: "a1"},
		{Sequence: 0, Token: 1, RequestId: "a2"},
		{Sequence: ds[2].Sequence, Token: ds[2].Token, RequestId: "a3"},
	}}
	want := []string{"", "aborted", "invalid_argument", ""}
	for attempt := range 2 { // the second: a retry after a lost reply
		res, err := c.AckBatch(ctxFor(t, callTimeout), connect.NewRequest(req))
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res.Msg.Results {
			if got := r.GetError().GetCode(); got != want[i] {
				t.Fatalf("attempt %d: ack %d answered %q (%s), want %q", attempt, i, got, r.GetError().GetMessage(), want[i])
			}
		}
	}
	get, err := c.Get(ctxFor(t, callTimeout), connect.NewRequest(&pb.QueuesGetRequest{Queue: "jobs"}))
	if err != nil || get.Msg.Queue.Depth != 1 || len(get.Msg.InFlight) != 1 || get.Msg.InFlight[0].Sequence != ds[1].Sequence {
		t.Fatalf("after the batch: %v, %v; want only the stale-acked message left, in flight", get, err)
	}
	for name, bad := range map[string]*pb.QueuesAckBatchRequest{
		"no acks":      {Queue: "jobs"},
		"101 acks":     {Queue: "jobs", Acks: make([]*pb.QueueAck, 101)},
		"bad consumer": {Queue: "jobs", Consumer: "a/b", Acks: []*pb.QueueAck{{Sequence: 1, Token: 1}}},
	} {
		_, err := c.AckBatch(ctxFor(t, callTimeout), connect.NewRequest(bad))
		wantCode(t, err, connect.CodeInvalidArgument)
		if name == "101 acks" && !strings.Contains(err.Error(), "1 to 100") {
			t.Errorf("%s: %v, want the limit named", name, err)
		}
	}
	_, err = c.Receive(ctxFor(t, callTimeout), connect.NewRequest(&pb.QueuesReceiveRequest{Queue: "jobs",
		RequestId: strings.Repeat("r", 1000)}))
	wantCode(t, err, connect.CodeInvalidArgument, "request_id")
}
