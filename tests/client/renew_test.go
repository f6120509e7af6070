package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// TestRenewalFollowsProgress: a holder that reports progress keeps its
// lease; one that stops loses it once the progress timeout (default: the
// TTL) passes, and a waiter then gets the resource with a larger token.
func TestRenewalFollowsProgress(t *testing.T) {
	n := startNode(t)
	c := nodeClient(t, n)
	const ttl = 300 * time.Millisecond
	l := mustAcquire(t, c, []string{"renew/progress"}, client.TTL(ttl))

	// The holder reports progress every 50ms from a goroutine of its own,
	// so that the test's Gets, slow on a loaded machine, cannot stretch a
	// gap past the progress timeout. It notes when it last reported.
	var note atomic.Value
	note.Store("step")
	var lastProgress atomic.Int64 // unix nanoseconds, set before each report
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			lastProgress.Store(time.Now().UnixNano())
			l.Progress(note.Load().(string))
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	var stopOnce sync.Once
	stopProgress := func() time.Time {
		stopOnce.Do(func() { close(stop); <-stopped })
		return time.Unix(0, lastProgress.Load())
	}
	t.Cleanup(func() { stopProgress() })

	var lastCount uint64
	samples := 0
	start := time.Now()
	for time.Since(start) < 1500*time.Millisecond {
		time.Sleep(ttl) // one sample per TTL: about three renewals apart
		if isDone(l) {
			t.Fatalf("lease ended after %v although its holder reported progress every 50ms (last %v ago): %v",
				time.Since(start), time.Since(time.Unix(0, lastProgress.Load())), l.Err())
		}
		h := holderOf(t, c, "renew/progress")
		if h.ID != l.ID() || h.Token != l.Token() {
			t.Fatalf("server holder %v, want lease %d token %d", h, l.ID(), l.Token())
		}
		if h.RenewCount <= lastCount {
			t.Fatalf("renew_count %d did not grow past %d in ~300ms (TTL %v)", h.RenewCount, lastCount, ttl)
		}
		lastCount = h.RenewCount
		samples++
	}
	if samples < 3 {
		t.Fatalf("only %d server samples in 1.5s", samples)
	}
	// 1.5s at one renewal per TTL/3: about 15.
	if lastCount < 8 {
		t.Fatalf("renew_count %d after 1.5s with TTL %v; expected about 15", lastCount, ttl)
	}

	// The note reaches the server with a renewal.
	note.Store("rows 1-1000 written")
	eventually(t, 2*time.Second, "the progress note shows on the server", func() bool {
		return holderOf(t, c, "renew/progress").Progress == "rows 1-1000 written"
	})

	// The holder stops reporting progress: renewal stops and the lease ends.
	last := stopProgress()
	type result struct {
		l   *client.Lease
		err error
	}
	waiter := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		w, err := c.Acquire(ctx, "renew/progress", client.TTL(5*time.Second), client.Wait(5*time.Second))
		waiter <- result{w, err}
	}()
	// Renewal may go on for up to the progress timeout plus one renewal
	// interval, and the lease then lasts one more TTL.
	endedAt := waitDone(t, l, 3*time.Second)
	if d := endedAt.Sub(last); d < ttl {
		t.Fatalf("lease ended %v after the last progress, before the progress timeout (%v)", d, ttl)
	}
	if miss := missing(l.Err(), client.ErrLeaseLost, client.ErrNoProgress); miss != nil {
		t.Fatalf("Err() = %v; does not match %v", l.Err(), miss)
	}
	var r result
	select {
	case r = <-waiter:
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not granted after the lease lapsed")
	}
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	hold(t, r.l)
	if r.l.Token() <= l.Token() {
		t.Fatalf("waiter token %d not above the lapsed holder's %d", r.l.Token(), l.Token())
	}
	if got := counter(t, c.Reg, "leasehold_client_leases_lost_total"); got != 1 {
		t.Fatalf("leasehold_client_leases_lost_total = %v, want 1", got)
	}
	// Releasing the lapsed lease reports the loss.
	if err := l.Release(ctxFor(t, callTimeout)); !errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("Release of a lapsed lease: %v, want ErrLeaseLost", err)
	}
	if h := holderOf(t, c, "renew/progress"); h.ID != r.l.ID() {
		t.Fatalf("the lapsed holder's Release disturbed the new holder: %v", h)
	}
}

// TestProgressTimeoutZeroRenewsWithoutProgress: ProgressTimeout(0) renews
// for holders with nothing to report.
func TestProgressTimeoutZeroRenewsWithoutProgress(t *testing.T) {
	n := startNode(t)
	c := nodeClient(t, n)
	const ttl = 300 * time.Millisecond
	l := mustAcquire(t, c, []string{"renew/noprogress"}, client.TTL(ttl), client.ProgressTimeout(0))
	time.Sleep(600 * time.Millisecond)
	before := holderOf(t, c, "renew/noprogress")
	time.Sleep(600 * time.Millisecond)
	after := holderOf(t, c, "renew/noprogress")
	if isDone(l) {
		t.Fatalf("lease with ProgressTimeout(0) ended: %v", l.Err())
	}
	if before.ID != l.ID() || after.ID != l.ID() {
		t.Fatalf("server holders %v, %v; want lease %d", before, after, l.ID())
	}
	if after.RenewCount <= before.RenewCount || before.RenewCount == 0 {
		t.Fatalf("renew_count %d then %d: not renewing", before.RenewCount, after.RenewCount)
	}
}

// TestDeadlineNeverLaterThanServer checks invariant 3. The local deadline
// counts from before the request was sent, so after Acquire and every
// renewal Deadline() <= (time just before sending) + TTL. And since the
// server's expiry lies between the moments a Get was sent and answered,
// plus the expires_in it reports, Deadline() > (after Get) + expires_in
// would prove the client later than the server.
func TestDeadlineNeverLaterThanServer(t *testing.T) {
	n := startNode(t)
	c := nodeClient(t, n)
	const ttl = 2 * time.Second

	checkServer := func(l *client.Lease, resource string) {
		t.Helper()
		d := l.Deadline()
		h := holderOf(t, c, resource)
		after := time.Now()
		if h.ID != l.ID() {
			t.Fatalf("server holder %v, want %d", h, l.ID())
		}
		if !h.ExpiresKnown {
			t.Fatal("server does not report expires_in for the holder")
		}
		if server := after.Add(h.ExpiresIn); d.After(server) {
			t.Fatalf("local deadline %v later than the server's expiry (at most %v)", d, server)
		}
	}

	t.Run("manual", func(t *testing.T) {
		before := time.Now()
		l := mustAcquire(t, c, []string{"deadline/manual"}, client.TTL(ttl), client.ManualRenew())
		if d := l.Deadline(); d.After(before.Add(ttl)) {
			t.Fatalf("after Acquire: deadline %v is after send time + TTL %v", d, before.Add(ttl))
		} else if d.Before(before.Add(ttl / 2)) {
			t.Fatalf("after Acquire: deadline %v leaves less than half the TTL", d)
		}
		checkServer(l, "deadline/manual")
		for i := range 5 {
			time.Sleep(30 * time.Millisecond)
			before := time.Now()
			if err := l.Renew(ctxFor(t, callTimeout)); err != nil {
				t.Fatalf("renewal %d: %v", i, err)
			}
			if d := l.Deadline(); d.After(before.Add(ttl)) {
				t.Fatalf("after renewal %d: deadline %v is after send time + TTL %v", i, d, before.Add(ttl))
			} else if !d.After(before) {
				t.Fatalf("after renewal %d: deadline %v not after the renewal was sent", i, d)
			}
			checkServer(l, "deadline/manual")
		}
	})

	t.Run("reply delayed", func(t *testing.T) {
		// Every Acquire and Renew answer (unary or in a Batch) is held back a second on its way
		// to the client, so the grant happens about a second before the
		// client hears of it. Counting from the send, the deadline is at
		// most send + TTL·(1 − DriftRatio) − Drift; a client that counted
		// from the answer would be about a second past that bound.
		const ttl, delay = 3 * time.Second, time.Second
		cfg := client.Config{Session: client.SessionOff, Drift: 10 * time.Millisecond, DriftRatio: 0.02}
		proxy, sentBy := delayedReplies(t, n.URL, delay, "/Acquire", "/Renew", "/Batch")
		dc := newClient(t, cfg, proxy)
		bound := func(sent time.Time) time.Time {
			return sent.Add(time.Duration(float64(ttl)*(1-cfg.DriftRatio)) - cfg.Drift)
		}
		before := time.Now()
		l := mustAcquire(t, dc, []string{"deadline/delayed"}, client.TTL(ttl), client.ManualRenew())
		if waited := time.Since(before); waited < delay {
			t.Fatalf("Acquire answered after %v: the proxy did not delay it", waited)
		}
		if d := l.Deadline(); d.After(bound(sentBy())) {
			t.Fatalf("after a delayed Acquire: deadline %v is %v past send + TTL·(1−ratio) − drift", d, d.Sub(bound(sentBy())))
		}
		checkServer(l, "deadline/delayed")
		for i := range 2 {
			before := time.Now()
			if err := l.Renew(ctxFor(t, callTimeout)); err != nil {
				t.Fatalf("renewal %d: %v", i, err)
			}
			if d := l.Deadline(); d.After(bound(sentBy())) {
				t.Fatalf("after delayed renewal %d: deadline %v is %v past send + TTL·(1−ratio) − drift", i, d, d.Sub(bound(sentBy())))
			} else if !d.After(before.Add(delay)) {
				t.Fatalf("after delayed renewal %d: deadline %v not past the answer's arrival", i, d)
			}
			checkServer(l, "deadline/delayed")
		}
	})

	t.Run("background", func(t *testing.T) {
		// Renewed every third of the TTL: with 1s, a renewal may take
		// 650ms on a loaded machine before the lease lapses under the
		// checks, and three still happen within the second watched.
		const ttl = time.Second
		before := time.Now()
		l := mustAcquire(t, c, []string{"deadline/auto"}, client.TTL(ttl), client.ProgressTimeout(0))
		if d := l.Deadline(); d.After(before.Add(ttl)) {
			t.Fatalf("after Acquire: deadline %v is after send time + TTL %v", d, before.Add(ttl))
		}
		first := l.Deadline()
		// Any renewal behind an observed deadline was sent before the
		// observation, so Deadline() <= now + TTL at every moment.
		end := time.Now().Add(time.Second)
		for time.Now().Before(end) {
			d := l.Deadline()
			now := time.Now()
			if d.After(now.Add(ttl)) {
				t.Fatalf("deadline %v is more than the TTL after now (%v)", d, now)
			}
			checkServer(l, "deadline/auto")
			time.Sleep(20 * time.Millisecond)
		}
		if !l.Deadline().After(first) {
			t.Fatal("background renewal never moved the deadline")
		}
	})
}

// delayedReplies serves target through a reverse proxy that holds back
// the answer of every call whose path ends in one of suffixes by delay.
// The returned func says when the proxy received the last such call: the
// client sent it no later than that.
func delayedReplies(t *testing.T, target string, delay time.Duration, suffixes ...string) (string, func() time.Time) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var arrived time.Time
	matches := func(path string) bool {
		for _, s := range suffixes {
			if strings.HasSuffix(path, s) {
				return true
			}
		}
		return false
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		if matches(resp.Request.URL.Path) {
			time.Sleep(delay)
		}
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if matches(r.URL.Path) {
			mu.Lock()
			arrived = time.Now()
			mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return arrived
	}
}

// TestManualRenewKeepsLease: with ManualRenew, the caller's Renew calls
// keep the lease: the local deadline moves and the lease does not end at
// the first one.
func TestManualRenewKeepsLease(t *testing.T) {
	n := startNode(t)
	c := nodeClient(t, n)
	const ttl = 300 * time.Millisecond
	l := mustAcquire(t, c, []string{"renew/manual"}, client.TTL(ttl), client.ManualRenew())
	first := l.Deadline()
	end := time.Now().Add(4 * ttl)
	for time.Now().Before(end) {
		time.Sleep(ttl / 4)
		if isDone(l) {
			t.Fatalf("a ManualRenew lease renewed every %v ended %v past its first local deadline: %v",
				ttl/4, time.Since(first).Round(time.Millisecond), l.Err())
		}
		if err := l.Renew(ctxFor(t, callTimeout)); err != nil {
			t.Fatalf("Renew: %v", err)
		}
	}
	if h := holderOf(t, c, "renew/manual"); h.ID != l.ID() || h.RenewCount < 5 {
		t.Fatalf("server holder %v, want lease %d renewed about 16 times", h, l.ID())
	}
	// Without renewals it lapses at its deadline, and the reason is not a
	// lack of progress, which a ManualRenew holder never reports.
	at := waitDone(t, l, 2*time.Second)
	if at.Before(l.Deadline()) {
		t.Fatalf("lapsed at %v, before its deadline %v", at, l.Deadline())
	}
	if !errors.Is(l.Err(), client.ErrLeaseLost) {
		t.Fatalf("Err() = %v, want ErrLeaseLost", l.Err())
	}
}

// TestLeaseContext: Lease.Context ends with a cause wrapping ErrLeaseLost
// when the lease is lost, and with ErrReleased after Release.
func TestLeaseContext(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := nodeClient(t, n)

	t.Run("lapsed", func(t *testing.T) {
		l := mustAcquire(t, c, []string{"ctx/lapsed"}, client.TTL(300*time.Millisecond))
		ctx := l.Context(context.Background())
		select {
		case <-ctx.Done():
		case <-time.After(3 * time.Second):
			t.Fatal("context of a lease whose holder reports no progress did not end")
		}
		if miss := missing(context.Cause(ctx), client.ErrLeaseLost, client.ErrNoProgress); miss != nil {
			t.Fatalf("cause %v does not match %v", context.Cause(ctx), miss)
		}
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("ctx.Err() = %v", ctx.Err())
		}
		// A context made after the loss is born canceled.
		late := l.Context(context.Background())
		select {
		case <-late.Done():
		case <-time.After(time.Second):
			t.Fatal("context made after the loss is not canceled")
		}
		if !errors.Is(context.Cause(late), client.ErrLeaseLost) {
			t.Fatalf("late cause %v", context.Cause(late))
		}
	})

	t.Run("taken away", func(t *testing.T) {
		l := mustAcquire(t, c, []string{"ctx/taken"}, client.TTL(2*time.Second), client.ProgressTimeout(0))
		ctx := l.Context(context.Background())
		if err := c.ReleaseByID(ctxFor(t, callTimeout), l.ID(), l.Secret()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(3 * time.Second):
			t.Fatal("context did not end after the server dropped the lease")
		}
		cause := context.Cause(ctx)
		if !errors.Is(cause, client.ErrLeaseLost) {
			t.Fatalf("cause %v, want ErrLeaseLost", cause)
		}
		if !errors.Is(cause, leasehold.ErrNotFound) && !errors.Is(cause, leasehold.ErrNotHolder) {
			t.Fatalf("cause %v does not say the server no longer knows the lease", cause)
		}
		if errors.Is(cause, client.ErrNoProgress) {
			t.Fatalf("cause %v blames progress", cause)
		}
	})

	t.Run("released", func(t *testing.T) {
		l := mustAcquire(t, c, []string{"ctx/released"}, client.TTL(5*time.Second))
		ctx := l.Context(context.Background())
		if ctx.Err() != nil {
			t.Fatalf("context of a live lease ended: %v", context.Cause(ctx))
		}
		if err := l.Release(ctxFor(t, callTimeout)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
			t.Fatal("context not canceled after Release")
		}
		if cause := context.Cause(ctx); !errors.Is(cause, client.ErrReleased) || errors.Is(cause, client.ErrLeaseLost) {
			t.Fatalf("cause after Release %v, want ErrReleased", cause)
		}
		if !errors.Is(l.Err(), client.ErrReleased) {
			t.Fatalf("Err() after Release = %v", l.Err())
		}
	})

	t.Run("parent canceled", func(t *testing.T) {
		l := mustAcquire(t, c, []string{"ctx/parent"}, client.TTL(5*time.Second))
		parent, cancel := context.WithCancelCause(context.Background())
		stop := errors.New("caller stopped")
		ctx := l.Context(parent)
		cancel(stop)
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), stop) {
			t.Fatalf("cause %v, want the parent's", context.Cause(ctx))
		}
		if isDone(l) || l.Err() != nil {
			t.Fatalf("canceling the parent ended the lease: %v", l.Err())
		}
	})
}

// TestRenewByID: a lease known only by id and secret (as the CLI holds it)
// is renewed with its progress note; a wrong secret is not the holder, and
// an ended lease is not found.
func TestRenewByID(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := nodeClient(t, n)
	l := mustAcquire(t, c, []string{"renew/byid"}, client.TTL(time.Minute), client.ManualRenew())
	info, expiresIn, err := c.RenewByID(ctxFor(t, callTimeout), l.ID(), l.Secret(), "rows 1-10")
	if err != nil {
		t.Fatalf("RenewByID: %v", err)
	}
	if expiresIn <= 0 || expiresIn > time.Minute || info == nil || info.ID != l.ID() {
		t.Fatalf("RenewByID: lease %+v, expires in %v; want lease %d and a countdown in (0, 1m]", info, expiresIn, l.ID())
	}
	if h := holderOf(t, c, "renew/byid"); h.RenewCount != 1 || h.Progress != "rows 1-10" {
		t.Fatalf("after RenewByID the holder has %d renewals and progress %q; want 1 and the note", h.RenewCount, h.Progress)
	}
	if _, _, err := c.RenewByID(ctxFor(t, callTimeout), l.ID(), strings.Repeat("0", 32), ""); !errors.Is(err, leasehold.ErrNotHolder) {
		t.Fatalf("RenewByID with a wrong secret: %v, want ErrNotHolder", err)
	}
	if err := l.Release(ctxFor(t, callTimeout)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.RenewByID(ctxFor(t, callTimeout), l.ID(), l.Secret(), ""); !errors.Is(err, leasehold.ErrNotFound) {
		t.Fatalf("RenewByID after release: %v, want ErrNotFound", err)
	}
}
