package client_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// A producer's and consumer's frequent calls (Send, SendBatch, Receive,
// Ack, Nack, AckBatch) and idempotency's Begin, Complete and Abandon go on the
// session stream: no unary call of theirs is made.
func TestSessionCarriesQueueAndIdempotencyCalls(t *testing.T) {
	n := startNode(t)
	pc := h2cCounter(t)
	c := sessionClient(t, pc, client.Config{}, n.URL)
	ctx := ctxFor(t, callTimeout)
	if _, err := c.CreateQueue(ctx, "s/q", client.QueueSettings{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, "s/q", leasehold.Message{Key: "a", Body: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendBatch(ctx, "s/q", []leasehold.Message{{Key: "b", Body: []byte("2")}, {Key: "c", Body: []byte("3")}}); err != nil {
		t.Fatal(err)
	}
	ds, err := c.Receive(ctx, "s/q", 3)
	if err != nil || len(ds) != 3 {
		t.Fatalf("receive: %d deliveries, %v; want 3", len(ds), err)
	}
	if err := c.Ack(ctx, ds[0]); err != nil {
		t.Fatal(err)
	}
	if err := c.Nack(ctx, ds[1], 0, "again"); err != nil {
		t.Fatal(err)
	}
	again, err := c.Receive(ctx, "s/q", 1)
	if err != nil || len(again) != 1 || again[0].Sequence != ds[1].Sequence || again[0].Receives != 2 {
		t.Fatalf("receive after the nack: %+v, %v; want sequence %d again", again, err, ds[1].Sequence)
	}
	if errs, err := c.AckBatch(ctx, []leasehold.Delivery{again[0], ds[2]}); err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("ack batch: %v, %v", errs, err)
	}
	if q, err := c.Queue(ctx, "s/q", 0); err != nil || q.Depth != 0 {
		t.Fatalf("queue after the acks: depth %d, %v; want 0", q.Depth, err)
	}

	a, _, err := c.Begin(ctx, "s/pay", []byte("f"))
	if err != nil || a == nil {
		t.Fatalf("begin: %v, %v", a, err)
	}
	if err := a.Complete(ctx, []byte("paid")); err != nil {
		t.Fatal(err)
	}
	if a, res, err := c.Begin(ctx, "s/pay", []byte("f")); err != nil || a != nil || !bytes.Equal(res, []byte("paid")) {
		t.Fatalf("begin of a completed key: %v, %q, %v; want its result", a, res, err)
	}
	b, _, err := c.Begin(ctx, "s/other", []byte("f"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Abandon(ctx); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"Send", "SendBatch", "Receive", "Ack", "Nack", "AckBatch", "Begin", "Complete", "Abandon"} {
		if pc.count(m) != 0 {
			t.Errorf("%d unary %s calls; want them on the stream (%v)", pc.count(m), m, pc.hits)
		}
	}
	if pc.count("Session") != 1 {
		t.Fatalf("want one Session stream; got %v", pc.hits)
	}
}

// Where no stream can be had the same calls go unary, and act.
func TestSessionCallsFallBackToUnary(t *testing.T) {
	n := startNode(t)
	pc := newPathCounter(t) // HTTP/1.1: no stream
	c := sessionClient(t, pc, client.Config{}, n.URL)
	ctx := ctxFor(t, callTimeout)
	if _, err := c.CreateQueue(ctx, "s/q", client.QueueSettings{}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := c.Send(ctx, "s/q", leasehold.Message{Key: "a", Body: []byte{byte(i)}}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	a, _, err := c.Begin(ctx, "s/pay", []byte("f"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Complete(ctx, []byte("paid")); err != nil {
		t.Fatal(err)
	}
	if q, err := c.Queue(ctx, "s/q", 0); err != nil || q.Depth != 2 {
		t.Fatalf("queue: depth %d, %v; want 2", q.Depth, err)
	}
	if pc.count("Session") > 1 || pc.count("Send") != 2 || pc.count("Begin") != 1 || pc.count("Complete") != 1 {
		t.Fatalf("want at most one Session attempt, then the calls unary; got %v", pc.hits)
	}
}

// A Send and an Ack whose answers were lost with their stream are sent
// again, with the same request IDs, on a new stream: the message is
// enqueued once (the retry answers the first's sequence) and the retried
// Ack is answered as the first was, not as a stale token.
func TestSessionCallRetryOverReopenedStreamActsOnce(t *testing.T) {
	n := startNode(t)
	p := newDeafProxy(t, n.URL)
	pc := h2cCounter(t)
	c := sessionClient(t, pc, client.Config{RequestTimeout: 2 * time.Second}, p.URL())
	direct := nodeClient(t, n)
	ctx := ctxFor(t, callTimeout)
	if _, err := direct.CreateQueue(ctx, "s/q", client.QueueSettings{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, "s/q", leasehold.Message{Key: "a", Body: []byte("1")}); err != nil { // the stream answers
		t.Fatal(err)
	}
	ds, err := direct.Receive(ctx, "s/q", 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %v, %v", ds, err)
	}
	depth := func() int {
		q, err := direct.Queue(ctxFor(t, callTimeout), "s/q", 0)
		if err != nil {
			t.Fatal(err)
		}
		return q.Depth
	}

	p.setDeaf(true)
	type sent struct {
		s   leasehold.Sent
		err error
	}
	sends, acks := make(chan sent, 1), make(chan error, 1)
	go func() {
		s, err := c.Send(ctxFor(t, 20*time.Second), "s/q", leasehold.Message{Key: "b", Body: []byte("2")})
		sends <- sent{s, err}
	}()
	go func() { acks <- c.Ack(ctxFor(t, 20*time.Second), ds[0]) }()
	// Both acted on the node (the first message acked, the second
	// enqueued); their answers are lost.
	var seq uint64
	eventually(t, 10*time.Second, "the send and the ack committed", func() bool {
		q, err := direct.Queue(ctxFor(t, callTimeout), "s/q", 0)
		if err != nil || q.Depth != 1 || q.InFlight != 0 {
			return false
		}
		d, err := direct.Receive(ctxFor(t, callTimeout), "s/q", 1, client.VisibilityTimeout(time.Hour))
		if err != nil || len(d) != 1 {
			t.Fatalf("receive of the second message: %v, %v", d, err)
		}
		seq = d[0].Sequence
		return true
	})
	p.setDeaf(false)
	p.cut()
	s := <-sends
	if s.err != nil || s.s.Sequence != seq {
		t.Fatalf("send sent again: %+v, %v; want the first answer, sequence %d", s.s, s.err, seq)
	}
	if err := <-acks; err != nil {
		t.Fatalf("ack sent again: %v (want its first answer)", err)
	}
	if d := depth(); d != 1 {
		t.Fatalf("queue depth %d after the retries; want 1 (enqueued once)", d)
	}
	if pc.count("Session") < 2 || pc.count("Send") != 0 || pc.count("Ack") != 0 {
		t.Fatalf("want the calls sent again on a second stream, got %v", pc.hits)
	}
}

// A Begin that waits for another attempt waits on the stream past
// RequestTimeout, and is answered when that attempt completes; one whose
// caller leaves is withdrawn.
func TestSessionBeginWaitsOnTheStream(t *testing.T) {
	n := startNode(t)
	pc := h2cCounter(t)
	c := sessionClient(t, pc, client.Config{RequestTimeout: time.Second}, n.URL)
	ctx := ctxFor(t, callTimeout)
	a, _, err := c.Begin(ctx, "s/wait", []byte("f"))
	if err != nil {
		t.Fatal(err)
	}
	type begun struct {
		res []byte
		err error
	}
	got := make(chan begun, 1)
	go func() {
		_, res, err := c.Begin(ctxFor(t, 20*time.Second), "s/wait", []byte("f"), client.WaitFor(15*time.Second))
		got <- begun{res, err}
	}()
	time.Sleep(2 * time.Second) // past RequestTimeout: the stream must not give up on it
	if err := a.Complete(ctx, []byte("done")); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-got:
		if b.err != nil || string(b.res) != "done" {
			t.Fatalf("waiting begin: %q, %v; want the result", b.res, b.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting begin was not answered when the attempt completed")
	}
	if pc.count("Begin") != 0 || pc.count("Session") != 1 {
		t.Fatalf("want the begins on one stream; got %v", pc.hits)
	}
}

// A member's AckRevocation goes on the stream, and hands the partition
// over as its unary call does.
func TestSessionCarriesAckRevocation(t *testing.T) {
	n := startNode(t)
	pc := h2cCounter(t)
	c := sessionClient(t, pc, client.Config{}, n.URL)
	ctx := ctxFor(t, 30*time.Second)
	if _, err := c.CreateGroup(ctx, "s/g", 2); err != nil {
		t.Fatal(err)
	}
	a, err := c.Join(ctx, "s/g", "a", client.TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Leave(ctxFor(t, 5*time.Second))
	s := a.Assignments(ctx)
	for added := false; !added; {
		for _, ch := range nextUpdate(t, s, 10*time.Second).Changes {
			added = added || ch.State == client.Added
		}
	}
	b, err := c.Join(ctx, "s/g", "b", client.TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Leave(ctxFor(t, 5*time.Second))
	var revoked *client.Assignment
	for revoked == nil {
		for _, ch := range nextUpdate(t, s, 10*time.Second).Changes {
			if ch.State == client.Revoking {
				revoked = &ch
			}
		}
	}
	if err := a.AckRevocation(ctx, revoked.Partition, revoked.Epoch+1000); !errors.Is(err, leasehold.ErrStaleToken) {
		t.Fatalf("ack with a wrong epoch: %v, want ErrStaleToken", err)
	}
	if err := a.AckRevocation(ctx, revoked.Partition, revoked.Epoch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the partition handed over", func() bool {
		g, err := c.Group(ctx, "s/g")
		return err == nil && g.PendingRevocations == 0 && g.PartitionList[revoked.Partition].Epoch > revoked.Epoch
	})
	if pc.count("AckRevocation") != 0 || pc.count("Session") != 1 {
		t.Fatalf("want the acks on the one stream; got %v", pc.hits)
	}
}

// A Complete whose answer was lost with its stream is sent again on a new
// stream and answered as the first was: the key keeps the first result.
func TestSessionIdemCompleteRetryOverReopenedStream(t *testing.T) {
	n := startNode(t)
	p := newDeafProxy(t, n.URL)
	pc := h2cCounter(t)
	c := sessionClient(t, pc, client.Config{RequestTimeout: 2 * time.Second}, p.URL())
	direct := nodeClient(t, n)
	ctx := ctxFor(t, callTimeout)
	a, _, err := c.Begin(ctx, "s/pay", []byte("f")) // the stream answers
	if err != nil {
		t.Fatal(err)
	}
	p.setDeaf(true)
	done := make(chan error, 1)
	go func() { done <- a.Complete(ctxFor(t, 20*time.Second), []byte("paid")) }()
	eventually(t, 10*time.Second, "the complete committed", func() bool {
		r, err := direct.IdemGet(ctxFor(t, callTimeout), "s/pay")
		return err == nil && string(r.Result) == "paid"
	})
	p.setDeaf(false)
	p.cut()
	if err := <-done; err != nil {
		t.Fatalf("complete sent again: %v (want its first answer)", err)
	}
	if pc.count("Session") < 2 || pc.count("Complete") != 0 {
		t.Fatalf("want the complete sent again on a second stream, got %v", pc.hits)
	}
}

// A Receive whose answer was lost with its stream is sent again, with the
// same request ID, on a new stream: it answers the delivery the first
// handed out (the same token, which acks), instead of leaving it in
// flight to nobody. A waiting Receive waits on the stream.
func TestSessionReceiveRetryOverReopenedStream(t *testing.T) {
	n := startNode(t)
	p := newDeafProxy(t, n.URL)
	pc := h2cCounter(t)
	c := sessionClient(t, pc, client.Config{RequestTimeout: 2 * time.Second}, p.URL())
	direct := nodeClient(t, n)
	ctx := ctxFor(t, callTimeout)
	if _, err := direct.CreateQueue(ctx, "s/q", client.QueueSettings{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, "s/q", leasehold.Message{Key: "a", Body: []byte("1")}); err != nil { // the stream answers
		t.Fatal(err)
	}
	p.setDeaf(true)
	type received struct {
		ds  []leasehold.Delivery
		err error
	}
	got := make(chan received, 1)
	go func() {
		ds, err := c.Receive(ctxFor(t, 20*time.Second), "s/q", 1, client.PollWait(5*time.Second))
		got <- received{ds, err}
	}()
	eventually(t, 10*time.Second, "the delivery handed out", func() bool {
		q, err := direct.Queue(ctxFor(t, callTimeout), "s/q", 0)
		return err == nil && q.InFlight == 1
	})
	p.setDeaf(false)
	p.cut()
	r := <-got
	if r.err != nil || len(r.ds) != 1 {
		t.Fatalf("receive sent again: %v, %v; want the delivery the first handed out", r.ds, r.err)
	}
	if err := c.Ack(ctx, r.ds[0]); err != nil {
		t.Fatalf("ack of the retried receive's delivery: %v (want its token to be the one in flight)", err)
	}
	if q, err := direct.Queue(ctx, "s/q", 0); err != nil || q.Depth != 0 {
		t.Fatalf("queue after the ack: depth %d, %v; want 0", q.Depth, err)
	}
	if pc.count("Session") < 2 || pc.count("Receive") != 0 {
		t.Fatalf("want the receive sent again on a second stream, got %v", pc.hits)
	}
}
