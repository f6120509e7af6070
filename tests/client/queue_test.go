package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
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
	if _, err := c.Send(ctx, "retry", leasehold.Message{Key: "k", Body: []byte("one")}); err != nil {
		t.Fatalf("Send whose reply was lost: %v", err)
	}
	reset("Send")
	if d := depth(); d != 1 {
		t.Fatalf("depth %d after one Send retried after a lost reply, want 1", d)
	}

	dropReply()
	if _, err := c.SendBatch(ctx, "retry", []leasehold.Message{{Key: "k", Body: []byte("two")}, {Key: "j"}}); err != nil {
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

// A Purge, Redrive, Nack, Delete and Create whose replies are lost after
// the node acted are retried with the same request ID and answered as the
// first attempt was: what was sent or died between the attempts is kept
// (a second purge would drop it, a second redrive move it), and the Nack
// and Delete succeed instead of answering stale or not found. An Extend
// needs no request ID: its retry extends the same delivery again.
func TestQueueAdminCallsRetriedAfterALostReplyActOnce(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	p := startResetProxy(t, n.URL)
	c := newClient(t, client.Config{}, p.URL())
	direct := nodeClient(t, n)
	ctx := ctxFor(t, callTimeout)
	if _, err := c.CreateQueue(ctx, "admin", client.QueueSettings{MaxReceives: 1}); err != nil { // a pooled connection to reset
		t.Fatal(err)
	}
	info := func() client.QueueInfo {
		t.Helper()
		q, err := direct.Queue(ctx, "admin", 0)
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	// loseReply arms the proxy to drop the next reply, running between
	// (if not nil) before the client sees the reset and retries.
	loseReply := func(between func()) {
		p.whileLost.Store(&between)
		if between == nil {
			p.whileLost.Store(nil)
		}
		p.resets.Store(0)
		p.dropReply.Store(true)
	}
	reset := func(what string) {
		t.Helper()
		if p.resets.Load() == 0 {
			t.Fatalf("%s: the proxy reset nothing; the test proves nothing", what)
		}
	}
	send := func(key string) {
		if _, err := direct.Send(ctx, "admin", leasehold.Message{Key: key, Body: []byte(key)}); err != nil {
			t.Error(err)
		}
	}
	kill := func(key string) { // a dead letter: its one receive nacked
		send(key)
		ds, err := direct.Receive(ctx, "admin", 1)
		if err != nil || len(ds) != 1 {
			t.Errorf("receive %s: %v %v", key, ds, err)
			return
		}
		if err := direct.Nack(ctx, ds[0], 0, "poison"); err != nil {
			t.Error(err)
		}
	}

	send("a")
	send("b")
	loseReply(func() { send("sent-between") })
	dropped, err := c.PurgeQueue(ctx, "admin", "test")
	reset("Purge")
	if err != nil || dropped != 2 {
		t.Fatalf("Purge whose reply was lost: %d dropped, %v; want the first answer, 2", dropped, err)
	}
	if q := info(); q.Depth != 1 {
		t.Fatalf("depth %d after a Purge retried after a lost reply; want the message sent between the attempts kept", q.Depth)
	}

	if _, err := direct.PurgeQueue(ctx, "admin", "clean slate"); err != nil {
		t.Fatal(err)
	}
	kill("x")
	loseReply(func() { kill("died-between") })
	moved, err := c.Redrive(ctx, "admin", 0)
	reset("Redrive")
	if err != nil || moved != 1 {
		t.Fatalf("Redrive whose reply was lost: %d moved, %v; want the first answer, 1", moved, err)
	}
	if q := info(); q.Dead != 1 {
		t.Fatalf("%d dead after a Redrive retried after a lost reply; want the one that died between the attempts", q.Dead)
	}

	if _, err := direct.PurgeQueue(ctx, "admin", "clean slate"); err != nil {
		t.Fatal(err)
	}
	send("n")
	ds, err := c.Receive(ctx, "admin", 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %v %v", ds, err)
	}
	loseReply(nil)
	deadline, err := c.Extend(ctx, ds[0], time.Minute, "half way")
	reset("Extend")
	if err != nil || time.Until(deadline) < 30*time.Second {
		t.Fatalf("Extend whose reply was lost: deadline in %v, %v; want the delivery extended", time.Until(deadline), err)
	}
	loseReply(nil)
	if err := c.Nack(ctx, ds[0], 10*time.Minute, "later"); err != nil {
		t.Fatalf("Nack whose reply was lost: %v; want the retry answered as the first attempt", err)
	}
	reset("Nack")
	if q := info(); q.InFlight != 0 || q.Depth != 1 {
		t.Fatalf("after the Nack: %d in flight, depth %d; want the message back, not in flight", q.InFlight, q.Depth)
	}

	loseReply(nil)
	if err := c.DeleteQueue(ctx, "admin", "done"); err != nil {
		t.Fatalf("Delete whose reply was lost: %v; want the retry answered as the first attempt", err)
	}
	reset("Delete")
	if _, err := direct.Queue(ctx, "admin", 0); !errors.Is(err, leasehold.ErrNotFound) {
		t.Fatalf("the deleted queue: %v, want not found", err)
	}
}
