package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/internal/testcluster"
)

// TestFailClosedAcquireWithNodeDown: with the store unreachable, Acquire
// fails within its context's bound with an error that says so.
func TestFailClosedAcquireWithNodeDown(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := nodeClient(t, n)
	n.Stop()
	const bound = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	start := time.Now()
	l, err := c.Acquire(ctx, "fc/acquire", client.TTL(time.Second))
	took := time.Since(start)
	if l != nil {
		hold(t, l)
		t.Fatalf("Acquire with the node down returned a lease (degraded=%v)", l.Degraded())
	}
	if took > bound+300*time.Millisecond {
		t.Fatalf("Acquire with the node down took %v; its context allowed %v", took, bound)
	}
	if !errors.Is(err, leasehold.ErrUnavailable) {
		t.Fatalf("Acquire with the node down: %v; want an error matching leasehold.ErrUnavailable", err)
	}
	if got := counter(t, c.Reg, "leasehold_client_degraded_leases_total"); got != 0 {
		t.Fatalf("FailClosed counted %v degraded leases", got)
	}
}

// TestFailClosedLeaseEndsAtLocalDeadline: a held lease whose store goes
// away ends at its local deadline, not before and not (much) later.
func TestFailClosedLeaseEndsAtLocalDeadline(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := nodeClient(t, n)
	l := mustAcquire(t, c, []string{"fc/held"}, client.TTL(time.Second), client.ProgressTimeout(0))
	ctx := l.Context(context.Background())
	time.Sleep(400 * time.Millisecond) // let a renewal or so go through
	n.Stop()
	ended := waitDone(t, l, 3*time.Second)
	d := l.Deadline() // final: no renewal can succeed any more
	if ended.Before(d) {
		t.Fatalf("lease ended %v before its local deadline", d.Sub(ended))
	}
	if late := ended.Sub(d); late > 200*time.Millisecond {
		t.Fatalf("lease ended %v after its local deadline; the holder worked unprotected", late)
	}
	if !errors.Is(l.Err(), client.ErrLeaseLost) || errors.Is(l.Err(), client.ErrNoProgress) {
		t.Fatalf("Err() = %v, want ErrLeaseLost (and not for lack of progress)", l.Err())
	}
	if l.Degraded() {
		t.Fatal("a FailClosed lease degraded")
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
		t.Fatal("lease context not canceled at the loss")
	}
	if !errors.Is(context.Cause(ctx), client.ErrLeaseLost) {
		t.Fatalf("context cause %v", context.Cause(ctx))
	}
	if got := counter(t, c.Reg, "leasehold_client_leases_lost_total"); got != 1 {
		t.Fatalf("leasehold_client_leases_lost_total = %v, want 1", got)
	}
	if got := counter(t, c.Reg, "leasehold_client_renewal_failures_total"); got < 1 {
		t.Fatalf("leasehold_client_renewal_failures_total = %v, want >= 1", got)
	}
}

// TestFailOpenAcquireWithNodeDown: FailOpen hands out a degraded lease,
// token 0, and counts it.
func TestFailOpenAcquireWithNodeDown(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := nodeClient(t, n)
	n.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	l, err := c.Acquire(ctx, "fo/acquire", client.TTL(time.Second), client.FailOpen())
	if err != nil {
		t.Fatalf("FailOpen Acquire with the node down: %v (after %v); want a degraded lease", err, time.Since(start))
	}
	hold(t, l)
	if !l.Degraded() || l.Token() != 0 || l.ID() != 0 {
		t.Fatalf("FailOpen lease: degraded=%v token=%d id=%d; want degraded, token 0", l.Degraded(), l.Token(), l.ID())
	}
	if got := counter(t, c.Reg, "leasehold_client_degraded_leases_total"); got != 1 {
		t.Fatalf("leasehold_client_degraded_leases_total = %v, want 1", got)
	}
	if err := l.Release(ctxFor(t, time.Second)); err != nil {
		t.Fatalf("Release of a degraded lease: %v", err)
	}
	if !isDone(l) || !errors.Is(l.Err(), client.ErrReleased) {
		t.Fatalf("degraded lease after Release: done=%v err=%v", isDone(l), l.Err())
	}
}

// TestFailOpenHeldLeaseDegrades: a FailOpen lease whose store goes away
// degrades at its local deadline instead of ending.
func TestFailOpenHeldLeaseDegrades(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := nodeClient(t, n)
	l := mustAcquire(t, c, []string{"fo/held"}, client.TTL(600*time.Millisecond), client.ProgressTimeout(0), client.FailOpen())
	n.Stop()
	eventually(t, 3*time.Second, "the lease degrades", l.Degraded)
	if l.Token() != 0 {
		t.Fatalf("degraded lease still shows token %d", l.Token())
	}
	if time.Now().Before(l.Deadline()) {
		t.Fatal("degraded before its local deadline")
	}
	if isDone(l) {
		t.Fatalf("FailOpen lease ended instead of degrading: %v", l.Err())
	}
	if got := counter(t, c.Reg, "leasehold_client_degraded_leases_total"); got != 1 {
		t.Fatalf("leasehold_client_degraded_leases_total = %v, want 1", got)
	}
	rctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	l.Release(rctx) // the store is down: it cannot confirm
}

// TestReleaseAfterServerExpiry: releasing a lease the server already
// expired reports the loss (ErrLeaseLost, ErrNotFound) and counts work done
// after it; a second Release returns nil.
func TestReleaseAfterServerExpiry(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := nodeClient(t, n)
	l := mustAcquire(t, c, []string{"rel/expired"}, client.TTL(200*time.Millisecond), client.ManualRenew())
	eventually(t, 3*time.Second, "the server expires the lease", func() bool {
		return get(t, c, "rel/expired").Holder == nil
	})
	ctx := ctxFor(t, callTimeout)
	err := l.Release(ctx)
	if miss := missing(err, client.ErrLeaseLost, leasehold.ErrNotFound); miss != nil {
		t.Fatalf("Release after expiry: %v; does not match %v", err, miss)
	}
	if got := counter(t, c.Reg, "leasehold_client_work_after_loss_total"); got != 1 {
		t.Fatalf("leasehold_client_work_after_loss_total = %v, want 1", got)
	}
	if !isDone(l) || !errors.Is(l.Err(), client.ErrLeaseLost) {
		t.Fatalf("after Release: done=%v Err()=%v", isDone(l), l.Err())
	}
	if strings.Contains(err.Error(), l.Secret()) {
		t.Fatal("the error carries the lease secret")
	}
	// "Calling Release again returns nil" (Lease.Release doc), and the
	// loss is counted once.
	if err := l.Release(ctx); err != nil {
		t.Errorf("second Release of an expired lease: %v; want nil", err)
	}
	if got := counter(t, c.Reg, "leasehold_client_work_after_loss_total"); got != 1 {
		t.Errorf("leasehold_client_work_after_loss_total = %v after a second Release, want still 1", got)
	}
}

func TestReleaseTwice(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := nodeClient(t, n)
	l := mustAcquire(t, c, []string{"rel/twice"}, client.TTL(5*time.Second))
	ctx := ctxFor(t, callTimeout)
	if err := l.Release(ctx); err != nil {
		t.Fatalf("first Release: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if got := counter(t, c.Reg, "leasehold_client_work_after_loss_total"); got != 0 {
		t.Fatalf("leasehold_client_work_after_loss_total = %v, want 0", got)
	}
	if got := counter(t, c.Reg, "leasehold_client_leases_lost_total"); got != 0 {
		t.Fatalf("leasehold_client_leases_lost_total = %v, want 0", got)
	}
	// Renew after Release fails.
	if err := l.Renew(ctx); err == nil {
		t.Fatal("Renew after Release succeeded")
	}
}

// TestReleaseHonorsContextWhileRenewalRetries: Release must not wait for a
// background renewal that is retrying against an unreachable store until
// the lease's deadline; it is bounded by its own context.
func TestReleaseHonorsContextWhileRenewalRetries(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := nodeClient(t, n)
	const ttl = 3 * time.Second
	l := mustAcquire(t, c, []string{"rel/ctx"}, client.TTL(ttl), client.ProgressTimeout(0))
	n.Stop()
	// The first renewal is due at TTL/3; it then retries until the deadline.
	time.Sleep(ttl/3 + 200*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	l.Release(ctx)
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Release with a 300ms context took %v (it waited for the renewal loop, which retries until the local deadline)", took)
	}
}

// TestFailoverToNextEndpoint: a dead first endpoint is skipped, and the
// client stays on the one that works.
func TestFailoverToNextEndpoint(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	dead := closedAddr(t)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	ct := &countingTransport{next: tr, hits: map[string]int{}}
	c := newClient(t, client.Config{HTTPClient: &http.Client{Transport: ct}}, "http://"+dead, n.URL)

	ctx := ctxFor(t, callTimeout)
	start := time.Now()
	l, err := c.Acquire(ctx, "failover/r", client.TTL(5*time.Second))
	if err != nil {
		t.Fatalf("Acquire with a dead first endpoint: %v", err)
	}
	hold(t, l)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("moving past the dead endpoint took %v", took)
	}
	if ct.count(dead) == 0 {
		t.Fatal("the dead endpoint was never tried; the test proves nothing")
	}
	deadHits := ct.count(dead)
	for range 10 {
		get(t, c, "failover/r")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ct.count(dead); got != deadHits {
		t.Fatalf("the client went back to the dead endpoint %d more times", got-deadHits)
	}
}

// TestRetryAcrossRestart: a node restarted on the same data dir (and the
// same endpoint URL) between calls. While it is down, calls retry until
// their context ends and fail with an error that says the store is
// unavailable; once it is back, a waiting call succeeds, tokens keep
// growing, and a lease held across the restart survives.
func TestRetryAcrossRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n1 := testcluster.StartNode(t, dir)
	sd := &switchDialer{}
	sd.set(n1.URL)
	tr := &http.Transport{DialContext: sd.dial}
	t.Cleanup(tr.CloseIdleConnections)
	c := newClient(t, client.Config{HTTPClient: &http.Client{Transport: tr}}, "http://localhost") // any name the node answers to: sd says where it is

	before := mustAcquire(t, c, []string{"restart/a"}, client.TTL(5*time.Second))
	kept := mustAcquire(t, c, []string{"restart/kept"}, client.TTL(6*time.Second), client.ProgressTimeout(0))
	if err := before.Release(ctxFor(t, callTimeout)); err != nil {
		t.Fatal(err)
	}
	n1.Stop()
	// Start from a fresh dial, so this part does not depend on whether the
	// pool noticed the closed connection yet (TestRetryAfterConnectionReset
	// covers a stale one).
	tr.CloseIdleConnections()

	// Down: retried until the context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	start := time.Now()
	_, err := c.Get(ctx, "restart/a")
	cancel()
	took := time.Since(start)
	if took < 250*time.Millisecond || took > time.Second {
		t.Errorf("Get with the node down returned after %v; want about its 300ms context", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get with the node down: %v; want context.DeadlineExceeded", err)
	}
	if !errors.Is(err, leasehold.ErrUnavailable) {
		t.Errorf("Get with the node down: %v; want it to match leasehold.ErrUnavailable too", err)
	}

	// A call made while the node is down succeeds once it is back.
	type result struct {
		l   *client.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		l, err := c.Acquire(ctx, "restart/a", client.TTL(5*time.Second))
		got <- result{l, err}
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case r := <-got:
		t.Fatalf("Acquire returned while the node was down: %v", r.err)
	default:
	}
	n2 := testcluster.StartNode(t, dir, func(cfg *cluster.Config) { cfg.RaftAddr = n1.Config.RaftAddr })
	sd.set(n2.URL)
	var r result
	select {
	case r = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("Acquire did not succeed after the node came back")
	}
	if r.err != nil {
		t.Fatalf("Acquire across the restart: %v", r.err)
	}
	hold(t, r.l)
	if r.l.Token() <= before.Token() || r.l.Token() <= kept.Token() {
		t.Fatalf("token after restart %d not above earlier tokens %d, %d", r.l.Token(), before.Token(), kept.Token())
	}
	// The lease held across the restart renewed through it.
	if isDone(kept) {
		t.Fatalf("lease held across a restart ended: %v", kept.Err())
	}
	h := holderOf(t, c, "restart/kept")
	if h.ID != kept.ID() {
		t.Fatalf("after restart the holder is %v, want lease %d", h, kept.ID())
	}
	count := h.RenewCount
	eventually(t, 5*time.Second, "the kept lease renews against the restarted node", func() bool {
		return holderOf(t, c, "restart/kept").RenewCount > count
	})
	ctx2 := ctxFor(t, callTimeout)
	if err := kept.Release(ctx2); err != nil {
		t.Fatalf("release of the kept lease: %v", err)
	}
	if err := r.l.Release(ctx2); err != nil {
		t.Fatal(err)
	}
}
