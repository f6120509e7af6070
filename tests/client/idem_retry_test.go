package client_test

import (
	"bytes"
	"testing"

	"github.com/leasehold/leasehold/client"
)

// A Begin, Complete and Abandon whose replies are lost after the node
// acted are retried and answered as the first attempt was: the retried
// Begin is the same attempt, the retried Complete succeeds (its result is
// stored: an error would make the caller think it was not), and the
// retried Abandon succeeds though its attempt is gone, instead of
// answering stale.
func TestIdemCallsRetriedAfterALostReplyAnswerAsTheFirst(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	p := startResetProxy(t, n.URL)
	c := newClient(t, client.Config{}, p.URL())
	direct := nodeClient(t, n)
	ctx := ctxFor(t, callTimeout)
	if _, err := c.IdemList(ctx, "", "", 1); err != nil { // a pooled connection to reset
		t.Fatal(err)
	}
	lose := func(what string, call func() error) {
		t.Helper()
		p.resets.Store(0)
		p.dropReply.Store(true)
		if err := call(); err != nil {
			t.Fatalf("%s whose reply was lost: %v; want the retry answered as the first attempt", what, err)
		}
		if p.resets.Load() == 0 {
			t.Fatalf("%s: the proxy reset nothing; the test proves nothing", what)
		}
	}

	var a *client.Attempt
	lose("Begin", func() (err error) {
		a, _, err = c.Begin(ctx, "pay/1", []byte("order 1"))
		return err
	})
	if a == nil {
		t.Fatal("a retried Begin answered no attempt")
	}
	if info, err := direct.IdemGet(ctx, "pay/1"); err != nil || info.Token != a.Token() {
		t.Fatalf("pay/1: %+v %v; want the attempt the retried Begin answered (token %d)", info, err, a.Token())
	}
	lose("Complete", func() error { return a.Complete(ctx, []byte("paid")) })
	if info, err := direct.IdemGet(ctx, "pay/1"); err != nil || info.State != "completed" || !bytes.Equal(info.Result, []byte("paid")) {
		t.Fatalf("pay/1 after the Complete: %+v %v; want its result stored", info, err)
	}

	b, _, err := c.Begin(ctx, "pay/2", []byte("order 2"))
	if err != nil || b == nil {
		t.Fatalf("begin pay/2: %v", err)
	}
	lose("Abandon", func() error { return b.Abandon(ctx) })
	again, _, err := direct.Begin(ctx, "pay/2", []byte("order 2"))
	if err != nil || again == nil || again.Token() <= b.Token() {
		t.Fatalf("begin pay/2 after the Abandon: %v; want a new attempt, the key free", err)
	}
	if err := again.Abandon(ctx); err != nil {
		t.Fatal(err)
	}
}
