package queue_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
)

// TestMain fails the package if a goroutine of Consume (a handler, an
// extension loop, a visibility timer) outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// setup starts a real node, makes queue "q" with settings and a client.
func setup(t *testing.T, s client.QueueSettings) *client.Client {
	t.Helper()
	return setupVia(t, s, func(rt http.RoundTripper) http.RoundTripper { return rt })
}

// setupVia is setup with the client's requests carried by wrap(transport).
func setupVia(t *testing.T, s client.QueueSettings, wrap func(http.RoundTripper) http.RoundTripper) *client.Client {
	t.Helper()
	n := testcluster.StartNode(t, "")
	tr, session := &http.Transport{}, client.SessionDefault
	if testcluster.SessionsOn() {
		// Sends and acks on a session stream, over h2c.
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		tr.Protocols, session = &p, client.SessionOn
	}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := client.New(client.Config{Endpoints: []string{n.URL}, HTTPClient: &http.Client{Transport: wrap(tr)},
		Logger: testcluster.Logger(), Session: session})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.CreateQueue(testutil.Context(t, 10*time.Second), "q", s); err != nil {
		t.Fatal(err)
	}
	return c
}

func send(t *testing.T, c *client.Client, key, body string) {
	t.Helper()
	if _, err := c.Send(testutil.Context(t, 10*time.Second), "q", leasehold.Message{Key: key, Body: []byte(body)}); err != nil {
		t.Fatal(err)
	}
}

// consume runs Consume in the background until the returned stop is
// called; stop returns Consume's error.
func consume(t *testing.T, c *client.Client, h queue.Handler, opts ...queue.Option) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- queue.Consume(ctx, c, "q", h, opts...) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				err = errors.New("Consume did not return within 30s of its context's end")
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

func depth(t *testing.T, c *client.Client) client.QueueInfo {
	t.Helper()
	q, err := c.Queue(testutil.Context(t, 10*time.Second), "q", 0)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// Consume runs up to n keys at once, never two messages of one key at
// once, each key's messages in send order, and acks each.
func TestConsumeRunsKeysInParallelAndEachKeyInOrder(t *testing.T) {
	c := setup(t, client.QueueSettings{})
	const keys, per, n = 8, 6, 3
	for i := range per {
		for k := range keys {
			send(t, c, "k"+strconv.Itoa(k), strconv.Itoa(i))
		}
	}
	var mu sync.Mutex
	running := map[string]bool{}
	seen := map[string][]string{}
	var now, peak, total atomic.Int32
	var overlap atomic.Value
	stop := consume(t, c, func(ctx context.Context, m *queue.Message) error {
		mu.Lock()
		if running[m.Key] {
			overlap.Store(m.Key)
		}
		running[m.Key] = true
		seen[m.Key] = append(seen[m.Key], string(m.Body))
		mu.Unlock()
		if v := now.Add(1); v > peak.Load() {
			peak.Store(v)
		}
		time.Sleep(20 * time.Millisecond)
		now.Add(-1)
		mu.Lock()
		running[m.Key] = false
		mu.Unlock()
		total.Add(1)
		return nil
	}, queue.Concurrency(n), queue.PollWait(time.Second))
	testutil.Eventually(t, 60*time.Second, "every message is handled and acked", func() (bool, string) {
		q := depth(t, c)
		return total.Load() == keys*per && q.Depth == 0, fmt.Sprintf("%d handled, depth %d", total.Load(), q.Depth)
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if k := overlap.Load(); k != nil {
		t.Fatalf("two messages of key %v ran at once", k)
	}
	if p := peak.Load(); p > n || p < 2 {
		t.Fatalf("at most %d handlers ran at once, want 2 to %d", p, n)
	}
	for k, got := range seen {
		for i, b := range got {
			if b != strconv.Itoa(i) {
				t.Fatalf("key %s handled in the order %v", k, got)
			}
		}
	}
}

// A handler that reports progress keeps its delivery past the visibility
// timeout: it is not redelivered, and its context does not end; a note
// longer than the server takes (1 KiB) is cut, not refused.
func TestConsumeExtendsWhileTheHandlerProgresses(t *testing.T) {
	for name, note := range map[string]string{"short note": "working", "long note": strings.Repeat("é", 1500)} {
		t.Run(name, func(t *testing.T) {
			c := setup(t, client.QueueSettings{})
			send(t, c, "k", "slow")
			// Roomy for a loaded machine: an extension every second, each
			// with 2s before the deadline; the handler runs two visibilities.
			const vis = 3 * time.Second
			var receives atomic.Int32
			var ctxErr atomic.Value
			done := make(chan struct{})
			stop := consume(t, c, func(ctx context.Context, m *queue.Message) error {
				receives.Add(1)
				end := time.Now().Add(2 * vis)
				for time.Now().Before(end) {
					m.Progress(note)
					select {
					case <-ctx.Done():
						ctxErr.Store(context.Cause(ctx))
						return ctx.Err()
					case <-time.After(100 * time.Millisecond):
					}
				}
				close(done)
				return nil
			}, queue.Visibility(vis), queue.PollWait(time.Second), queue.Concurrency(2))
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatalf("the handler did not finish (its context ended with %v)", ctxErr.Load())
			}
			testutil.Eventually(t, 30*time.Second, "the message is acked", func() bool { return depth(t, c).Depth == 0 })
			stop()
			if err := ctxErr.Load(); err != nil {
				t.Fatalf("the handler's context ended while it reported progress: %v", err)
			}
			if n := receives.Load(); n != 1 {
				t.Fatalf("the message was delivered %d times while its handler reported progress", n)
			}
		})
	}
}

// A handler that reports no progress gets no extension: its context ends
// (ErrVisibilityLost) before the server's visibility deadline, and the
// message is delivered again with a larger token.
func TestConsumeWithoutProgressEndsTheContextBeforeTheDeadline(t *testing.T) {
	c := setup(t, client.QueueSettings{MaxReceives: 10})
	send(t, c, "k", "stuck")
	const vis = 2 * time.Second
	type delivery struct {
		token   uint64
		took    time.Duration
		cause   error
		receive time.Time
	}
	got := make(chan delivery, 10)
	stop := consume(t, c, func(ctx context.Context, m *queue.Message) error {
		start := time.Now()
		if m.Receives > 1 {
			got <- delivery{token: m.Token, receive: start}
			return nil
		}
		<-ctx.Done()
		got <- delivery{token: m.Token, took: time.Since(start), cause: context.Cause(ctx), receive: start}
		return ctx.Err()
	}, queue.Visibility(vis), queue.PollWait(time.Second), queue.Backoff(0, 0))
	first := <-got
	if !errors.Is(first.cause, queue.ErrVisibilityLost) {
		t.Fatalf("the context ended with %v, want ErrVisibilityLost", first.cause)
	}
	if first.took >= vis {
		t.Fatalf("the context ended %v after the handler started, not before the %v visibility", first.took, vis)
	}
	var second delivery
	select {
	case second = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the message was not delivered again")
	}
	if second.token <= first.token {
		t.Fatalf("redelivered with token %d after %d", second.token, first.token)
	}
	stop()
}

// A failing handler's message is nacked with its error as the note and
// delivered again no sooner than the backoff; after max receives it is a
// dead letter carrying that note.
func TestConsumeNacksWithBackoffAndTheErrorNote(t *testing.T) {
	c := setup(t, client.QueueSettings{MaxReceives: 2})
	send(t, c, "k", "poison")
	const base = 700 * time.Millisecond
	var mu sync.Mutex
	var at []time.Time
	stop := consume(t, c, func(ctx context.Context, m *queue.Message) error {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		return fmt.Errorf("cannot parse %q", m.Body)
	}, queue.PollWait(time.Second), queue.Backoff(base, time.Minute))
	testutil.Eventually(t, 30*time.Second, "the message is a dead letter", func() bool { return depth(t, c).Dead == 1 })
	stop()
	mu.Lock()
	defer mu.Unlock()
	if len(at) != 2 {
		t.Fatalf("delivered %d times, want 2 (max receives)", len(at))
	}
	if gap := at[1].Sub(at[0]); gap < base {
		t.Fatalf("delivered again %v after a failure, before the %v backoff", gap, base)
	}
	dead, err := c.DeadLetters(testutil.Context(t, 10*time.Second), "q", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0].Note != `cannot parse "poison"` {
		t.Fatalf("dead letters %+v, want one noted with the handler's error", dead)
	}
}

// When Consume's context ends it stops receiving, lets a handler that
// finishes within the drain bound ack its message, and cancels and nacks
// one that does not (ErrDraining), so its message is ready again at once.
func TestConsumeDrainsWithinItsBound(t *testing.T) {
	c := setup(t, client.QueueSettings{MaxReceives: 10})
	send(t, c, "quick", "q")
	send(t, c, "stuck", "s")
	started := make(chan string, 2)
	release := make(chan struct{})
	stuckCause := make(chan error, 1)
	const drain = 1500 * time.Millisecond
	stop := consume(t, c, func(ctx context.Context, m *queue.Message) error {
		started <- m.Key
		if m.Key == "quick" {
			<-release
			return nil
		}
		<-ctx.Done()
		stuckCause <- context.Cause(ctx)
		return ctx.Err()
	}, queue.Concurrency(2), queue.PollWait(time.Second), queue.DrainTimeout(drain))
	for range 2 {
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("the handlers did not start")
		}
	}
	go func() { time.Sleep(200 * time.Millisecond); close(release) }()
	t0 := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	if took < drain || took > drain+10*time.Second {
		t.Fatalf("Consume returned %v after its context ended; the drain bound is %v", took, drain)
	}
	select {
	case cause := <-stuckCause:
		if !errors.Is(cause, queue.ErrDraining) {
			t.Fatalf("the stuck handler's context ended with %v, want ErrDraining", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stuck handler's context did not end")
	}
	q := depth(t, c)
	if q.Depth != 1 || q.InFlight != 0 {
		t.Fatalf("after the drain: depth %d, in flight %d; want the quick message acked and the stuck one back, not in flight", q.Depth, q.InFlight)
	}
	ds, err := c.Receive(testutil.Context(t, 10*time.Second), "q", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Key != "stuck" || ds[0].Receives != 2 {
		t.Fatalf("after the drain received %+v, want the stuck message at once, on its second receive", ds)
	}
}

// A handler that fails just after Consume's context ends has its nack on
// the way when the drain bound passes: Consume returns once that nack is
// answered, so no message it handled is still in flight.
func TestConsumeDrainWaitsForTheNackUnderWay(t *testing.T) {
	const nack = "/leasehold.v1.Queues/Nack"
	const drain, nackDelay = 2 * time.Second, 3 * time.Second
	c := setupVia(t, client.QueueSettings{MaxReceives: 10}, func(rt http.RoundTripper) http.RoundTripper {
		return &delayingTransport{RoundTripper: rt, path: nack, delay: nackDelay}
	})
	send(t, c, "k", "m")
	started := make(chan struct{}, 1)
	fail := make(chan struct{})
	stop := consume(t, c, func(ctx context.Context, m *queue.Message) error {
		started <- struct{}{}
		<-fail
		return errors.New("failed while draining")
	}, queue.PollWait(time.Second), queue.DrainTimeout(drain), queue.Backoff(0, 0))
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler did not start")
	}
	go func() { time.Sleep(100 * time.Millisecond); close(fail) }()
	t0 := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	if q := depth(t, c); q.Depth != 1 || q.InFlight != 0 {
		t.Fatalf("Consume returned %v after its context ended with depth %d, in flight %d; want the nacked message back, not in flight",
			took, q.Depth, q.InFlight)
	}
	ds, err := c.Receive(testutil.Context(t, 10*time.Second), "q", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Receives != 2 {
		t.Fatalf("after the drain received %+v, want the message at once, on its second receive", ds)
	}
}

// delayingTransport holds each request to one procedure for delay before
// sending it on.
type delayingTransport struct {
	http.RoundTripper
	path  string
	delay time.Duration
}

func (d *delayingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == d.path {
		t := time.NewTimer(d.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			if r.Body != nil {
				r.Body.Close()
			}
			return nil, context.Cause(r.Context())
		}
	}
	return d.RoundTripper.RoundTrip(r)
}

// A send to a full queue is refused with a RetryAfterError carrying the
// server's hint; it matches leasehold.ErrLimit, and nothing was enqueued.
func TestSendRefusedForBackpressureCarriesRetryAfter(t *testing.T) {
	c := setup(t, client.QueueSettings{MaxDepth: 2})
	send(t, c, "a", "1")
	send(t, c, "b", "2")
	_, err := c.Send(testutil.Context(t, 10*time.Second), "q", leasehold.Message{Key: "c", Body: []byte("3")})
	var ra *client.RetryAfterError
	if !errors.As(err, &ra) {
		t.Fatalf("a send past max_depth: %v, want a *client.RetryAfterError", err)
	}
	if ra.RetryAfter < time.Second {
		t.Fatalf("retry after %v; the server's hint is at least 1s", ra.RetryAfter)
	}
	if !errors.Is(err, leasehold.ErrLimit) {
		t.Fatalf("%v does not match leasehold.ErrLimit", err)
	}
	if _, err := c.SendBatch(testutil.Context(t, 10*time.Second), "q", []leasehold.Message{{Key: "d"}}); !errors.As(err, &ra) {
		t.Fatalf("a batch past max_depth: %v, want a *client.RetryAfterError", err)
	}
	if q := depth(t, c); q.Depth != 2 {
		t.Fatalf("depth %d after refused sends, want 2", q.Depth)
	}
}

// queue.Send waits out backpressure: refused while the queue is full, it
// sends again after the hint and is accepted once a message was acked.
func TestSendWaitsOutBackpressure(t *testing.T) {
	c := setup(t, client.QueueSettings{MaxDepth: 1})
	send(t, c, "a", "1")
	ctx := testutil.Context(t, 30*time.Second)
	ds, err := c.Receive(ctx, "q", 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %v %v", ds, err)
	}
	acked := make(chan time.Time, 1)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		c.Ack(ctx, ds[0])
		acked <- time.Now()
	}()
	sent, err := queue.Send(ctx, c, "q", leasehold.Message{Key: "b", Body: []byte("2")})
	done := time.Now()
	if err != nil || len(sent) != 1 || sent[0].Duplicate {
		t.Fatalf("queue.Send: %v %v", sent, err)
	}
	if at := <-acked; done.Before(at) {
		t.Fatalf("the send was accepted at %v, before the queue had room at %v", done, at)
	}
	if q := depth(t, c); q.Depth != 1 {
		t.Fatalf("depth %d, want 1 (the second message, once)", q.Depth)
	}
	// A send that cannot get room before ctx ends returns the refusal.
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if _, err := queue.Send(short, c, "q", leasehold.Message{Key: "c"}); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, leasehold.ErrLimit) {
		t.Fatalf("a send into a queue that stays full: %v, want the deadline and the last refusal", err)
	}
}
