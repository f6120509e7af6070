package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/service"
)

// TestCrashBeforeAcquire kills a client process while its acquire waits in
// line, before it is granted: the dead client must not end up holding the
// resource for its TTL (a minute). Its place is withdrawn once the grace
// for a retry (2s) has passed, and a grant that raced the withdrawal is
// given back, so the next live waiter gets the resource within the grace.
func TestCrashBeforeAcquire(t *testing.T) {
	n := startOne(t)
	c := newClient(t, "", n.url)
	h := &history{}
	ctx := testutil.Context(t, time.Minute)
	const r = "list/crash-before"
	first, err := c.Acquire(ctx, r, client.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	h.granted(r, first.ID(), first.Token())
	dead := startClientProc(t, r, []string{n.url}, clientOpts{TTL: time.Minute, Wait: time.Minute, Work: "hold"})
	err = checkFor(progressTimeout, func() error {
		if info, err := c.Get(ctx, r); err != nil || len(info.Waiters) != 1 {
			return fmt.Errorf("waiters of %s: %v %+v", r, err, info)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := dead.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// Released at once, the resource may go to the dead waiter before its
	// place is withdrawn: the withdrawal gives that grant back.
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := c.Acquire(ctx, r, client.TTL(listTTL), client.Wait(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	h.granted(r, next.ID(), next.Token())
	if took, bound := time.Since(killed), service.WithdrawGrace+5*time.Second; took > bound {
		t.Errorf("the next waiter got %s %v after the waiting client died (bound %v): the dead client held it", r, took, bound)
	}
	if o := dead.output(); o.token != 0 {
		t.Errorf("the client killed while waiting printed a grant: %+v", o)
	}
	next.Release(ctx)
	if info, err := c.Get(ctx, r); err != nil || info.Holder != nil || len(info.Waiters) != 0 {
		t.Errorf("%s after the last release: %v %+v, want free with nobody waiting", r, err, info)
	}
	finish(t, "crash-before-acquire", h, c, expect{}, nil)
}

// TestCrashAfterAcquire kills a client process that holds a lease and
// writes under it: the lease runs out by its TTL on the server (nobody
// has to step in), the next holder's token is higher, the dead holder's
// token is refused, and every write it was told was done is there.
func TestCrashAfterAcquire(t *testing.T) {
	n := startOne(t)
	c := newClient(t, "", n.url)
	h := &history{}
	ctx := testutil.Context(t, time.Minute)
	const r = "list/crash-after"
	holder, err := startWritingClient(t, r, []*node{n}, clientOpts{TTL: listTTL})
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	o := holder.output()
	h.granted(r, o.leaseID, o.token)
	for _, w := range o.acks {
		h.wrote(w)
	}
	next, err := c.Acquire(ctx, r, client.TTL(listTTL), client.Wait(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	h.granted(r, next.ID(), next.Token())
	if took, bound := time.Since(killed), listTTL+2*time.Second; took > bound {
		t.Errorf("the lease of the killed holder ended %v after the kill, its TTL is %v", took, listTTL)
	}
	if err := putFenced(ctx, c, h, r+"/next", []byte("next"), r, next.Token()); err != nil {
		t.Fatal(err)
	}
	putFenced(ctx, c, h, r+"/dead", []byte("dead"), r, o.token) // must be refused
	next.Release(context.WithoutCancel(ctx))
	finish(t, "crash-after-acquire", h, c, expect{}, nil)
}
