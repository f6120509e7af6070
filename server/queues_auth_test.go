package server_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// Workers send, receive and ack only within their prefixes of queue
// names; operators inspect; only admins create and purge. A consumer is
// named by its token and the name it gives.
func TestQueueAuthRoles(t *testing.T) {
	n := authNode(t)
	hc := httpClient(t)
	clients := map[string]leaseholdv1connect.QueuesClient{}
	for _, tok := range []string{workerToken, operatorToken, adminToken} {
		clients[tok] = leaseholdv1connect.NewQueuesClient(hc, n.URL, withToken(tok))
	}
	admin, operator, worker := clients[adminToken], clients[operatorToken], clients[workerToken]
	ctx := func() context.Context { return ctxFor(t, callTimeout) }
	for _, q := range []string{"jobs/q", "billing/q"} {
		if _, err := admin.Create(ctx(), connect.NewRequest(&pb.QueuesCreateRequest{Queue: q})); err != nil {
			t.Fatalf("admin create %s: %v", q, err)
		}
	}
	_, err := worker.Create(ctx(), connect.NewRequest(&pb.QueuesCreateRequest{Queue: "jobs/new"}))
	wantCode(t, err, connect.CodePermissionDenied, "needs admin")
	_, err = worker.Send(ctx(), connect.NewRequest(&pb.QueuesSendRequest{Queue: "billing/q", Key: "k"}))
	wantCode(t, err, connect.CodePermissionDenied, `"billing/q"`)
	if _, err := worker.Send(ctx(), connect.NewRequest(&pb.QueuesSendRequest{Queue: "jobs/q", Key: "k", Body: []byte("m")})); err != nil {
		t.Fatalf("worker send inside its prefix: %v", err)
	}
	res, err := worker.Receive(ctx(), connect.NewRequest(&pb.QueuesReceiveRequest{Queue: "jobs/q", Consumer: "w1"}))
	if err != nil || len(res.Msg.Deliveries) != 1 {
		t.Fatalf("worker receive: %v, %v", res, err)
	}
	d := res.Msg.Deliveries[0]
	if d.Consumer != "ci-worker/w1" {
		t.Fatalf("consumer %q, want the token's name and the consumer name", d.Consumer)
	}
	_, err = worker.List(ctx(), connect.NewRequest(&pb.QueuesListRequest{}))
	wantCode(t, err, connect.CodePermissionDenied)
	get, err := operator.Get(ctx(), connect.NewRequest(&pb.QueuesGetRequest{Queue: "jobs/q"}))
	if err != nil || len(get.Msg.InFlight) != 1 || get.Msg.InFlight[0].Body != nil {
		t.Fatalf("operator get: %v, %v; want the delivery in flight, without its body", get, err)
	}
	_, err = operator.Purge(ctx(), connect.NewRequest(&pb.QueuesPurgeRequest{Queue: "jobs/q", Reason: "x"}))
	wantCode(t, err, connect.CodePermissionDenied, "needs admin")
	if _, err := worker.Ack(ctx(), connect.NewRequest(&pb.QueuesAckRequest{Queue: d.Queue, Sequence: d.Sequence, Token: d.Token, Consumer: "w1"})); err != nil {
		t.Fatalf("worker ack: %v", err)
	}
}
