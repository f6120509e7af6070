package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"encoding/json"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testcluster"
)

func TestAcquireReturnsLeaseWithToken(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := nodeClient(t, n)
	l := mustAcquire(t, c, []string{"acq/basic"}, client.TTL(5*time.Second), client.Owner("worker-1"),
		client.Operation("nightly-report"), client.Metadata(map[string]string{"shard": "7"}))
	if l.Degraded() {
		t.Fatal("a lease granted by the server is degraded")
	}
	if got := l.Resources(); len(got) != 1 || got[0] != "acq/basic" {
		t.Fatalf("Resources() = %q", got)
	}
	if len(l.Secret()) != 2*leasehold.SecretBytes {
		t.Fatalf("secret is %d hex characters, want %d", len(l.Secret()), 2*leasehold.SecretBytes)
	}
	if isDone(l) || l.Err() != nil {
		t.Fatalf("fresh lease already ended: %v", l.Err())
	}

	res := get(t, c, "acq/basic")
	h := res.Holder
	if h == nil {
		t.Fatalf("server shows %s free while the client holds lease %d", res.Resource, l.ID())
	}
	if h.ID != l.ID() || h.Token != l.Token() {
		t.Fatalf("server holder id %d token %d, client id %d token %d", h.ID, h.Token, l.ID(), l.Token())
	}
	if h.Owner != "worker-1" || h.Operation != "nightly-report" || h.Metadata["shard"] != "7" {
		t.Fatalf("server holder lost the operator fields: %v", h)
	}
	if h.TTL != 5*time.Second {
		t.Fatalf("server TTL %v, want 5s", h.TTL)
	}
	// Invariant 9: the secret never shows in inspection output.
	js, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(js), l.Secret()) {
		t.Fatal("Get output contains the lease secret")
	}

	// A second Acquire without Wait fails at once with ErrHeld.
	ctx := ctxFor(t, callTimeout)
	start := time.Now()
	if l2, err := c.Acquire(ctx, "acq/basic"); !errors.Is(err, leasehold.ErrHeld) {
		if l2 != nil {
			hold(t, l2)
		}
		t.Fatalf("acquire of a held resource: %v, want ErrHeld", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("acquire of a held resource without Wait took %v", d)
	}
	if got := counter(t, c.Reg, "leasehold_client_acquisitions_total"); got != 2 {
		t.Fatalf("leasehold_client_acquisitions_total = %v, want 2", got)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	if h := get(t, c, "acq/basic").Holder; h != nil {
		t.Fatalf("resource still held after release: %v", h)
	}
}

// TestAcquireWithDefaultHTTPClient uses the pooled transport client.New
// makes itself (Config.HTTPClient nil).
func TestAcquireWithDefaultHTTPClient(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c, err := client.New(client.Config{Endpoints: []string{n.URL + "/"}, Logger: testcluster.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() }) // closes the idle connections of the transport New made
	ctx := ctxFor(t, callTimeout)
	l, err := c.Acquire(ctx, "acq/default-http", client.TTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	hold(t, l)
	if l.Token() == 0 {
		t.Fatal("token 0")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		endpoints []string
	}{
		{"no endpoints", nil},
		{"no scheme", []string{"127.0.0.1:7420"}},
		{"one of two without a scheme", []string{"http://127.0.0.1:7420", "127.0.0.1:7421"}},
		{"other scheme", []string{"grpc://127.0.0.1:7420"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if c, err := client.New(client.Config{Endpoints: tc.endpoints}); err == nil || c != nil {
				t.Fatalf("New(%q) = %v, %v; want an error", tc.endpoints, c, err)
			}
		})
	}
}

// TestTokensIncreaseUnderContention: two clients take turns on one
// resource; every grant's token is larger than the one before (invariant 1).
func TestTokensIncreaseUnderContention(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	clients := []*testClient{nodeClient(t, n), nodeClient(t, n)}
	const cycles = 20
	var (
		mu     sync.Mutex
		tokens []uint64
		errs   = make(chan error, len(clients))
		wg     sync.WaitGroup
	)
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range cycles {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				l, err := c.Acquire(ctx, "acq/contended", client.TTL(5*time.Second), client.Wait(15*time.Second),
					client.Owner(fmt.Sprint("client-", i)))
				if err != nil {
					cancel()
					errs <- fmt.Errorf("client %d cycle %d: acquire: %w", i, j, err)
					return
				}
				// Recorded while holding, so the slice is in grant order.
				mu.Lock()
				tokens = append(tokens, l.Token())
				mu.Unlock()
				err = l.Release(ctx)
				cancel()
				if err != nil {
					errs <- fmt.Errorf("client %d cycle %d: release: %w", i, j, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(tokens) != len(clients)*cycles {
		t.Fatalf("%d grants, want %d", len(tokens), len(clients)*cycles)
	}
	for i, tok := range tokens {
		if tok == 0 {
			t.Fatalf("grant %d has token 0", i)
		}
		if i > 0 && tok <= tokens[i-1] {
			t.Fatalf("grant %d token %d is not above the previous grant's %d: %v", i, tok, tokens[i-1], tokens)
		}
	}
}

// TestAcquireManyOppositeOrderNoDeadlock: {A,B} and {B,A} with Wait from two
// goroutines, many times over, always both complete (invariant 6).
func TestAcquireManyOppositeOrderNoDeadlock(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c1, c2 := nodeClient(t, n), nodeClient(t, n)
	const rounds = 15
	done := make(chan error, 2)
	run := func(c *testClient, resources []string) {
		for i := range rounds {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			l, err := c.AcquireMany(ctx, resources, client.TTL(5*time.Second), client.Wait(10*time.Second))
			if err != nil {
				cancel()
				done <- fmt.Errorf("%q round %d: %w", resources, i, err)
				return
			}
			if got := l.Resources(); len(got) != 2 {
				cancel()
				done <- fmt.Errorf("%q round %d: lease holds %q", resources, i, got)
				return
			}
			err = l.Release(ctx)
			cancel()
			if err != nil {
				done <- fmt.Errorf("%q round %d: release: %w", resources, i, err)
				return
			}
		}
		done <- nil
	}
	go run(c1, []string{"many/A", "many/B"})
	go run(c2, []string{"many/B", "many/A"})
	timeout := time.After(40 * time.Second)
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-timeout:
			t.Fatal("AcquireMany of {A,B} and {B,A} did not both complete: deadlock?")
		}
	}
	for _, r := range []string{"many/A", "many/B"} {
		if res := get(t, c1, r); res.Holder != nil || len(res.Waiters) != 0 {
			t.Fatalf("%s not free afterwards: %v", r, res)
		}
	}
}

func TestAcquireManyIsAllOrNothing(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := nodeClient(t, n)
	b := mustAcquire(t, c, []string{"aon/B"}, client.TTL(5*time.Second))
	ctx := ctxFor(t, callTimeout)
	if l, err := c.AcquireMany(ctx, []string{"aon/A", "aon/B"}); !errors.Is(err, leasehold.ErrHeld) {
		if l != nil {
			hold(t, l)
		}
		t.Fatalf("AcquireMany with one resource held: %v, want ErrHeld", err)
	}
	if h := get(t, c, "aon/A").Holder; h != nil {
		t.Fatalf("aon/A taken by a failed AcquireMany: %v", h)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := mustAcquire(t, c, []string{"aon/A", "aon/B"}, client.TTL(5*time.Second))
	for _, r := range []string{"aon/A", "aon/B"} {
		if h := holderOf(t, c, r); h.ID != l.ID() || h.Token != l.Token() {
			t.Fatalf("%s holder %v, want lease %d token %d", r, h, l.ID(), l.Token())
		}
	}
	if l.Token() <= b.Token() {
		t.Fatalf("token %d not above the earlier %d", l.Token(), b.Token())
	}
}

// TestWaitReturnsWhenHolderReleases: a waiting Acquire is granted as soon
// as the holder releases, with a larger token.
func TestWaitReturnsWhenHolderReleases(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := nodeClient(t, n)
	holder := mustAcquire(t, c, []string{"wait/release"}, client.TTL(10*time.Second))

	type result struct {
		l   *client.Lease
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l, err := c.Acquire(ctx, "wait/release", client.TTL(5*time.Second), client.Wait(5*time.Second))
		got <- result{l, err, time.Now()}
	}()
	eventually(t, 5*time.Second, "the waiter is queued on the server", func() bool {
		return len(get(t, c, "wait/release").Waiters) == 1
	})
	select {
	case r := <-got:
		if r.l != nil {
			hold(t, r.l)
		}
		t.Fatalf("waiting Acquire returned while the resource was held: %v", r.err)
	case <-time.After(200 * time.Millisecond):
	}
	released := time.Now()
	if err := holder.Release(ctxFor(t, callTimeout)); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("waiting Acquire did not return after the holder released")
	}
	if r.err != nil {
		t.Fatalf("waiting Acquire: %v", r.err)
	}
	hold(t, r.l)
	if d := r.at.Sub(released); d > 2*time.Second {
		t.Fatalf("waiter granted %v after the release", d)
	}
	if r.l.Token() <= holder.Token() {
		t.Fatalf("waiter token %d not above holder's %d", r.l.Token(), holder.Token())
	}
	if h := holderOf(t, c, "wait/release"); h.ID != r.l.ID() {
		t.Fatalf("server holder %v, want the waiter's lease %d", h, r.l.ID())
	}
}

func TestWaitTimesOut(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := nodeClient(t, n)
	mustAcquire(t, c, []string{"wait/timeout"}, client.TTL(10*time.Second))
	ctx := ctxFor(t, callTimeout)
	start := time.Now()
	l, err := c.Acquire(ctx, "wait/timeout", client.TTL(time.Second), client.Wait(300*time.Millisecond))
	took := time.Since(start)
	if l != nil {
		hold(t, l)
	}
	if !errors.Is(err, leasehold.ErrWaitTimeout) {
		t.Fatalf("Acquire with Wait(300ms) on a held resource: %v, want ErrWaitTimeout", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait timeout reported as the caller's own deadline: %v", err)
	}
	if took < 300*time.Millisecond || took > 3*time.Second {
		t.Fatalf("wait of 300ms ended after %v", took)
	}
	eventually(t, 3*time.Second, "no waiter left after the wait timed out", func() bool {
		return len(get(t, c, "wait/timeout").Waiters) == 0
	})
}

// TestCancelWaitingAcquireRemovesWaiter: canceling a waiting Acquire's
// context gives up its place in the queue on the server.
func TestCancelWaitingAcquireRemovesWaiter(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := nodeClient(t, n)
	holder := mustAcquire(t, c, []string{"wait/cancel"}, client.TTL(10*time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		l   *client.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := c.Acquire(ctx, "wait/cancel", client.TTL(5*time.Second), client.Wait(30*time.Second))
		got <- result{l, err}
	}()
	eventually(t, 5*time.Second, "the waiter is queued on the server", func() bool {
		return len(get(t, c, "wait/cancel").Waiters) == 1
	})
	cancel()
	select {
	case r := <-got:
		if r.l != nil {
			hold(t, r.l)
			t.Fatal("a canceled waiting Acquire returned a lease")
		}
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("canceled waiting Acquire: %v, want context.Canceled", r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiting Acquire did not return after its context was canceled")
	}
	eventually(t, 5*time.Second, "the canceled waiter leaves the server's queue", func() bool {
		return len(get(t, c, "wait/cancel").Waiters) == 0
	})
	// The withdrawn waiter must not be granted the resource later.
	if err := holder.Release(ctxFor(t, callTimeout)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if h := get(t, c, "wait/cancel").Holder; h != nil {
		t.Fatalf("resource granted to a withdrawn waiter: %v", h)
	}
}

// TestWaitedLeaseKeepsRenewing: a lease granted after waiting longer than
// its progress timeout keeps renewing while its holder reports progress.
// The wait is not the holder's idleness.
func TestWaitedLeaseKeepsRenewing(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := nodeClient(t, n)
	holder := mustAcquire(t, c, []string{"wait/renew"}, client.TTL(10*time.Second))
	go func() {
		time.Sleep(800 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		holder.Release(ctx)
	}()
	ctx := ctxFor(t, callTimeout)
	const ttl = 300 * time.Millisecond
	l, err := c.Acquire(ctx, "wait/renew", client.TTL(ttl), client.Wait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	hold(t, l)
	// The holder sets up for a moment, well within the progress timeout,
	// before it first reports progress.
	time.Sleep(50 * time.Millisecond)
	l.Progress("started")
	end := time.Now().Add(5 * ttl)
	for time.Now().Before(end) {
		if isDone(l) {
			t.Fatalf("a lease granted after an 800ms wait ended %v after the grant though its holder reported progress every 50ms: %v",
				time.Since(end.Add(-5*ttl)).Round(time.Millisecond), l.Err())
		}
		l.Progress("working")
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWithLock: fn runs under the lease with a context tied to it, the
// lease is released afterwards, and fn's error comes back.
func TestWithLock(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := nodeClient(t, n)
	ctx := ctxFor(t, callTimeout)
	errWork := errors.New("work failed")
	var (
		fnCtx context.Context
		lease *client.Lease
	)
	err := c.WithLock(ctx, "withlock/r", func(ctx context.Context, l *client.Lease) error {
		fnCtx, lease = ctx, l
		if ctx.Err() != nil {
			return fmt.Errorf("fn's context already ended: %w", context.Cause(ctx))
		}
		if l.Token() == 0 {
			return errors.New("fn got a lease with token 0")
		}
		h := holderOf(t, c, "withlock/r")
		if h.ID != l.ID() {
			return fmt.Errorf("server holder during fn is %v, want lease %d", h, l.ID())
		}
		l.Progress("half way")
		return errWork
	}, client.TTL(5*time.Second), client.Operation("withlock-test"))
	if !errors.Is(err, errWork) {
		t.Fatalf("WithLock returned %v, want fn's error", err)
	}
	if errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("WithLock reported a loss for a clean run: %v", err)
	}
	if h := get(t, c, "withlock/r").Holder; h != nil {
		t.Fatalf("resource still held after WithLock: %v", h)
	}
	select {
	case <-fnCtx.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("fn's context not canceled after WithLock released the lease")
	}
	if cause := context.Cause(fnCtx); !errors.Is(cause, client.ErrReleased) {
		t.Fatalf("fn's context cause %v, want ErrReleased", cause)
	}
	if !errors.Is(lease.Err(), client.ErrReleased) {
		t.Fatalf("lease Err after WithLock: %v", lease.Err())
	}

	// nil from fn: nil from WithLock.
	if err := c.WithLock(ctx, "withlock/r", func(context.Context, *client.Lease) error { return nil },
		client.TTL(5*time.Second)); err != nil {
		t.Fatalf("WithLock with a clean fn: %v", err)
	}

	// A held resource: WithLock does not run fn.
	other := mustAcquire(t, c, []string{"withlock/r"}, client.TTL(5*time.Second))
	ran := false
	err = c.WithLock(ctx, "withlock/r", func(context.Context, *client.Lease) error { ran = true; return nil })
	if ran || !errors.Is(err, leasehold.ErrHeld) {
		t.Fatalf("WithLock on a held resource: ran=%v err=%v", ran, err)
	}
	if err := other.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestWithLockContextEndsOnLoss: when the lease is lost while fn runs,
// fn's context ends with a cause wrapping ErrLeaseLost, and WithLock
// reports the loss.
func TestWithLockContextEndsOnLoss(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := nodeClient(t, n)
	ctx := ctxFor(t, callTimeout)
	err := c.WithLock(ctx, "withlock/lost", func(ctx context.Context, l *client.Lease) error {
		// Someone with the secret (an operator, via the CLI) releases it.
		if err := c.ReleaseByID(ctx, l.ID(), l.Secret()); err != nil {
			return fmt.Errorf("ReleaseByID: %w", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(3 * time.Second):
			return errors.New("fn's context still alive 3s after the lease was released behind its back (TTL 2s)")
		}
		if cause := context.Cause(ctx); !errors.Is(cause, client.ErrLeaseLost) {
			return fmt.Errorf("fn's context cause %v, want ErrLeaseLost", cause)
		}
		return nil
	}, client.TTL(2*time.Second), client.ProgressTimeout(0))
	if err == nil {
		t.Fatal("WithLock reported success for a lease lost during fn")
	}
	if !errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("WithLock after a loss: %v, want an error wrapping ErrLeaseLost", err)
	}
	if strings.Contains(err.Error(), "fn's context") || strings.Contains(err.Error(), "ReleaseByID") {
		t.Fatalf("fn failed: %v", err)
	}
}
