package client_test

import (
	"testing"

	"github.com/leasehold/leasehold/client"
)

// A Send, a SendBatch, a Receive and an Ack whose replies are lost to a
// connection reset after the node acted are retried with the same request
// ID: the messages are enqueued once (no dedup id needed), the Receive is
// answered with the lost reply's delivery (nothing else goes in flight),
// and the Ack is answered as the first was instead of as stale.
func TestQueueCallsRetriedAfterALostReplyActOnce(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	p := startResetProxy(t, n.URL)
	c := newClient(t, client.Config{}, p.URL())
	ctx := ctxFor(t, callTimeout)
	if _, err := c.CreateQueue(ctx, "retry", client.QueueSettings{}); err != nil { // a pooled connection to reset
		t.Fatal(err)
	}
	depth := func() int {
		t.Helper()
		q, err := c.Queue(ctx, "retry", 0)
		if err != nil {
			t.Fatal(err)
		}
		return q.Depth
	}
	dropReply := func() {
		p.resets.Store(0)
		p.dropReply.Store(true)
	}
	reset := func(what string) {
		t.Helper()
		if p.resets.Load() == 0 {
			t.Fatalf("%s: the proxy reset nothing; the test proves nothing", what)
		}
	}

	dropReply()
	if _, err := c.Send(ctx, "retry", client.Message{Key: "k", Body: []byte("one")}); err != nil {
		t.Fatalf("Send whose reply was lost: %v", err)
	}
	reset("Send")
	if d := depth(); d != 1 {
		t.Fatalf("depth %d after one Send retried after a lost reply, want 1", d)
	}

	dropReply()
	if _, err := c.SendBatch(ctx, "retry", []client.Message{{Key: "k", Body: []byte("two")}, {Key: "j"}}); err != nil {
		t.Fatalf("SendBatch whose reply was lost: %v", err)
	}
	reset("SendBatch")
	if d := depth(); d != 3 {
		t.Fatalf("depth %d after a batch of 2 retried after a lost reply, want 3", d)
	}

	dropReply()
	ds, err := c.Receive(ctx, "retry", 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive whose reply was lost: %v %v", ds, err)
	}
	reset("Receive")
	q, err := c.Queue(ctx, "retry", 0)
	if err != nil {
		t.Fatal(err)
	}
	if q.InFlight != 1 || len(q.InFlightKeys) != 1 || q.InFlightKeys[0].Token != ds[0].Token {
		t.Fatalf("after a Receive retried after a lost reply: %d in flight %+v; want only the delivery it answered (token %d)",
			q.InFlight, q.InFlightKeys, ds[0].Token)
	}
	dropReply()
	if err := c.Ack(ctx, ds[0]); err != nil {
		t.Fatalf("Ack whose reply was lost: %v; want the retry answered as the first attempt", err)
	}
	reset("Ack")
	if d := depth(); d != 2 {
		t.Fatalf("depth %d after the ack, want 2", d)
	}
}
