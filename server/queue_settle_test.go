package server_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/server"
)

// Two worker tokens with the same prefix: the one that did not receive a
// delivery cannot ack, nack or extend it even with its sequence and token
// (permission_denied naming the reason), nor can the receiving token under
// another consumer name; the delivery stays in flight and its own
// consumer acks it.
func TestQueueSettleOnlyByTheReceivingConsumer(t *testing.T) {
	t.Parallel()
	const otherToken = "other-worker-token-0123456789"
	auth, err := server.NewAuthenticator(server.AuthFile{Tokens: []server.TokenEntry{
		{Name: "ci-worker", SHA256: server.HashToken(workerToken), Role: "worker", Prefixes: []string{"jobs/"}},
		{Name: "mallory", SHA256: server.HashToken(otherToken), Role: "worker", Prefixes: []string{"jobs/"}},
		{Name: "alice", SHA256: server.HashToken(adminToken), Role: "admin"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	n := testcluster.StartServerNode(t, func(c *server.Config) { c.Auth = auth })
	hc := httpClient(t)
	admin := leaseholdv1connect.NewQueuesClient(hc, n.URL, withToken(adminToken))
	worker := leaseholdv1connect.NewQueuesClient(hc, n.URL, withToken(workerToken))
	other := leaseholdv1connect.NewQueuesClient(hc, n.URL, withToken(otherToken))
	ctx := func() context.Context { return ctxFor(t, callTimeout) }
	if _, err := admin.Create(ctx(), connect.NewRequest(&pb.QueuesCreateRequest{Queue: "jobs/q"})); err != nil {
		t.Fatal(err)
	}
	if _, err := worker.Send(ctx(), connect.NewRequest(&pb.QueuesSendRequest{Queue: "jobs/q", Key: "k", Body: []byte("m")})); err != nil {
		t.Fatal(err)
	}
	res, err := worker.Receive(ctx(), connect.NewRequest(&pb.QueuesReceiveRequest{Queue: "jobs/q", Consumer: "w1",
		Visibility: dur(time.Minute)}))
	if err != nil || len(res.Msg.Deliveries) != 1 {
		t.Fatalf("receive: %v, %v", res, err)
	}
	d := res.Msg.Deliveries[0]
	for _, tc := range []struct {
		name     string
		c        leaseholdv1connect.QueuesClient
		consumer string
	}{
		{"another token, same consumer name", other, "w1"},
		{"the same token, another consumer name", worker, "w2"},
		{"the same token, no consumer name", worker, ""},
	} {
		_, err := tc.c.Ack(ctx(), connect.NewRequest(&pb.QueuesAckRequest{Queue: d.Queue, Sequence: d.Sequence, Token: d.Token,
			Consumer: tc.consumer, RequestId: "r-" + tc.name}))
		wantCode(t, err, connect.CodePermissionDenied, "another consumer")
		_, err = tc.c.Nack(ctx(), connect.NewRequest(&pb.QueuesNackRequest{Queue: d.Queue, Sequence: d.Sequence, Token: d.Token,
			Consumer: tc.consumer}))
		wantCode(t, err, connect.CodePermissionDenied, "another consumer")
		_, err = tc.c.Extend(ctx(), connect.NewRequest(&pb.QueuesExtendRequest{Queue: d.Queue, Sequence: d.Sequence, Token: d.Token,
			Consumer: tc.consumer, Visibility: dur(time.Hour)}))
		wantCode(t, err, connect.CodePermissionDenied, "another consumer")
		batch, err := tc.c.AckBatch(ctx(), connect.NewRequest(&pb.QueuesAckBatchRequest{Queue: d.Queue, Consumer: tc.consumer,
			Acks: []*pb.QueueAck{{Sequence: d.Sequence, Token: d.Token}}}))
		if err != nil || batch.Msg.Results[0].GetError().GetCode() != "permission_denied" {
			t.Fatalf("%s: ack batch: %v, %v; want the ack refused as permission_denied", tc.name, batch, err)
		}
	}
	get, err := admin.Get(ctx(), connect.NewRequest(&pb.QueuesGetRequest{Queue: "jobs/q"}))
	if err != nil || len(get.Msg.InFlight) != 1 || get.Msg.InFlight[0].Token != d.Token {
		t.Fatalf("after the refused settlements: %v, %v; want the delivery still in flight", get, err)
	}
	if _, err := worker.Ack(ctx(), connect.NewRequest(&pb.QueuesAckRequest{Queue: d.Queue, Sequence: d.Sequence, Token: d.Token,
		Consumer: "w1"})); err != nil {
		t.Fatalf("the receiving consumer's ack: %v", err)
	}
}
