package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testcluster"
)

// boundTimeout is Config.Timeout in these tests; boundMargin what a call
// may take past its bound (scheduling on a loaded machine).
const (
	boundTimeout = time.Second
	boundMargin  = 700 * time.Millisecond
	boundWait    = 500 * time.Millisecond // the wait of the waiting calls
)

// blackHole is a loopback address that accepts connections (the kernel
// completes them into the listener's backlog) and never answers.
func blackHole(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}

// noQuorum is a 3-node cluster of which two nodes are stopped: every
// endpoint, the two dead and the one without a quorum.
func noQuorum(t testing.TB) []string {
	t.Helper()
	cl := testcluster.Start(t, 3)
	urls := cl.URLs()
	cl.Kill(0)
	cl.Kill(1)
	return urls
}

// boundCase is one call made with context.Background(), returning its
// error.
type boundCase struct {
	name    string
	wait    time.Duration // asked of the server: the bound is wait + Timeout
	session bool          // rides the session stream when the client has one
	stream  bool          // served by any node from its own log: not under noquorum
	once    bool          // not retried: may fail before its bound, with the node's refusal
	call    func(ctx context.Context, c *testClient) error
}

var boundCases = []boundCase{
	{name: "Acquire", session: true, call: func(ctx context.Context, c *testClient) error {
		_, err := c.Acquire(ctx, "bound/a", client.TTL(time.Second))
		return err
	}},
	{name: "AcquireWait", wait: boundWait, session: true, call: func(ctx context.Context, c *testClient) error {
		_, err := c.Acquire(ctx, "bound/w", client.TTL(time.Second), client.Wait(boundWait))
		return err
	}},
	{name: "ReleaseByID", session: true, call: func(ctx context.Context, c *testClient) error {
		return c.ReleaseByID(ctx, 1, strings.Repeat("0", 32))
	}},
	{name: "Put", call: func(ctx context.Context, c *testClient) error {
		_, err := c.Put(ctx, "bound/k", []byte("v"))
		return err
	}},
	{name: "ReceiveWait", wait: boundWait, session: true, call: func(ctx context.Context, c *testClient) error {
		_, err := c.Receive(ctx, "bound-q", 1, client.PollWait(boundWait))
		return err
	}},
	{name: "Begin", session: true, call: func(ctx context.Context, c *testClient) error {
		_, _, err := c.Begin(ctx, "bound/i", []byte("f"))
		return err
	}},
	{name: "Campaign", wait: boundWait, call: func(ctx context.Context, c *testClient) error {
		_, err := c.Campaign(ctx, "bound/e", "me", client.Wait(boundWait))
		return err
	}},
	{name: "Watch", stream: true, call: func(ctx context.Context, c *testClient) error {
		w := c.Watch(ctx, []string{"bound/"})
		for range w.Events() {
		}
		return w.Err()
	}},
	{name: "Observe", stream: true, call: func(ctx context.Context, c *testClient) error {
		o := c.Observe(ctx, "bound/e")
		for range o.Leaders() {
		}
		return o.Err()
	}},
	{name: "Snapshot", stream: true, once: true, call: func(ctx context.Context, c *testClient) error {
		_, err := c.Snapshot(ctx, func(client.SnapshotInfo) (io.Writer, error) { return io.Discard, nil })
		return err
	}},
}

// TestTimeoutBoundsCalls: with no deadline on its context, every call
// gives up after Config.Timeout (plus its wait, not less) with an error
// matching ErrUnavailable that names the endpoints and the bound, on a
// dead endpoint (nothing listens), a black-holed one (accepts, never
// answers) and a cluster without a quorum; on unary calls and on the
// session stream alike. The calls of a target run at once (subtests
// would queue behind -parallel).
func TestTimeoutBoundsCalls(t *testing.T) {
	t.Parallel()
	targets := []struct {
		name      string
		endpoints func(testing.TB) []string
		noQuorum  bool
	}{
		{"dead", func(t testing.TB) []string { return []string{"http://" + closedAddr(t)} }, false},
		{"blackhole", func(t testing.TB) []string { return []string{"http://" + blackHole(t)} }, false},
		{"noquorum", noQuorum, true},
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			eps := tg.endpoints(t)
			clients := map[string]*testClient{"": boundClient(t, eps, false), "/session": boundClient(t, eps, true)}
			type run struct {
				name string
				bc   boundCase
				res  chan timing
			}
			var runs []run
			for _, bc := range boundCases {
				for mode, c := range clients {
					if bc.stream && tg.noQuorum || mode != "" && !bc.session {
						continue
					}
					r := run{bc.name + mode, bc, make(chan timing, 1)}
					runs = append(runs, r)
					go func() { r.res <- timed(func() error { return bc.call(context.Background(), c) }) }()
				}
			}
			var lease *client.Lease
			failOpen := make(chan timing, 1)
			go func() {
				failOpen <- timed(func() (err error) {
					lease, err = clients[""].Acquire(context.Background(), "bound/fo", client.TTL(time.Second), client.FailOpen())
					return err
				})
			}()
			for _, r := range runs {
				t.Run(r.name, func(t *testing.T) { checkBound(t, r.res, r.bc.wait, r.bc.once, eps) })
			}
			t.Run("FailOpen", func(t *testing.T) {
				tm := await(t, failOpen, boundTimeout)
				if tm.err != nil || !lease.Degraded() {
					t.Fatalf("FailOpen Acquire after %v: %v; want a degraded lease", tm.took, tm.err)
				}
				lease.Release(context.Background())
			})
		})
	}
}

// boundClient is a client of eps with Config.Timeout boundTimeout, on
// unary calls or (session) on a session stream over h2c.
func boundClient(t testing.TB, eps []string, session bool) *testClient {
	cfg := client.Config{Timeout: boundTimeout, Session: client.SessionOff}
	if session {
		cfg = onStream(t, cfg)
	}
	c := newClient(t, cfg, eps...)
	t.Cleanup(func() { c.Close() })
	return c
}

// timing is how a call ended and how long it took.
type timing struct {
	took time.Duration
	err  error
}

func timed(f func() error) timing {
	start := time.Now()
	err := f()
	return timing{time.Since(start), err}
}

// await is the timing of a call bounded by bound: the test fails if it
// took longer than bound plus boundMargin, or has not returned 5s later
// (it is left running).
func await(t *testing.T, res <-chan timing, bound time.Duration) timing {
	t.Helper()
	select {
	case tm := <-res:
		if tm.took > bound+boundMargin {
			t.Errorf("returned after %v; its bound was %v", tm.took, bound)
		}
		return tm
	case <-time.After(bound + 5*time.Second):
		t.Fatalf("had not returned after %v; its bound was %v", bound+5*time.Second, bound)
		return timing{}
	}
}

// checkBound checks that a call with context.Background() failed with
// ErrUnavailable, naming the endpoints and the bound, at its bound: the
// wait plus Timeout (or before, with any Unavailable, for a call made once).
func checkBound(t *testing.T, res <-chan timing, wait time.Duration, once bool, eps []string) {
	bound := wait + boundTimeout
	tm := await(t, res, bound)
	t.Logf("gave up after %v (bound %v)", tm.took.Round(time.Millisecond), bound)
	if !errors.Is(tm.err, leasehold.ErrUnavailable) {
		t.Fatalf("after %v: %v; want an error matching leasehold.ErrUnavailable", tm.took, tm.err)
	}
	if once && tm.took < bound {
		return
	}
	if errors.Is(tm.err, context.DeadlineExceeded) || errors.Is(tm.err, context.Canceled) {
		t.Errorf("the error %q matches a context error; the caller's context did not end", tm.err)
	}
	if tm.took < bound {
		t.Errorf("gave up after %v, before its bound %v (wait %v + Timeout %v)", tm.took, bound, wait, boundTimeout)
	}
	for _, want := range append([]string{bound.String()}, eps...) {
		if !strings.Contains(tm.err.Error(), want) {
			t.Errorf("the error %q does not name %s", tm.err, want)
		}
	}
}

// TestTimeoutBoundsOpeningAssignments: a member's assignment stream that
// no node opens (the node went away after the Join: dead, then
// black-holed) gives up after Config.Timeout with ErrUnavailable.
func TestTimeoutBoundsOpeningAssignments(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	for _, tg := range []struct{ name, addr string }{{"dead", closedAddr(t)}, {"blackhole", blackHole(t)}} {
		t.Run(tg.name, func(t *testing.T) {
			sd := &switchDialer{}
			sd.set(n.URL)
			tr := &http.Transport{DialContext: sd.dial}
			t.Cleanup(tr.CloseIdleConnections)
			c := newClient(t, client.Config{Timeout: boundTimeout, HTTPClient: &http.Client{Transport: tr}, Session: client.SessionOff},
				"http://localhost")
			ctx := ctxFor(t, callTimeout)
			group := "bound-" + tg.name
			if _, err := c.CreateGroup(ctx, group, 2); err != nil {
				t.Fatal(err)
			}
			m, err := c.Join(ctx, group, "m", client.TTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			sd.set("http://" + tg.addr)
			tr.CloseIdleConnections()
			res := make(chan timing, 1)
			go func() {
				res <- timed(func() error {
					s := m.Assignments(context.Background())
					for range s.Updates() {
					}
					return s.Err()
				})
			}()
			checkBound(t, res, 0, false, []string{"http://localhost"})
		})
	}
}

// TestTimeoutDoesNotCutOpenStreams: a watch that opened outlives
// Config.Timeout (and RequestTimeout) on one stream, and one whose first
// endpoint is black-holed moves on to the next after RequestTimeout
// instead of waiting out Timeout there.
func TestTimeoutDoesNotCutOpenStreams(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	const timeout = 2 * time.Second
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	ct := &countingTransport{next: tr, hits: map[string]int{}}
	live := strings.TrimPrefix(n.URL, "http://")
	c := newClient(t, client.Config{Timeout: timeout, RequestTimeout: 300 * time.Millisecond, HTTPClient: &http.Client{Transport: ct}},
		"http://"+blackHole(t), n.URL)
	start := time.Now()
	w := c.Watch(context.Background(), []string{"open/"})
	defer func() {
		c.Close()
		for range w.Events() {
		}
	}()
	// Written until the watch sees one: it opens on the second endpoint
	// well before Timeout.
	var seen client.Event
	eventually(t, timeout, "the watch opens past the black hole", func() bool {
		if _, err := c.Put(ctxFor(t, callTimeout), "open/early", []byte("v")); err != nil {
			t.Fatal(err)
		}
		var ok bool
		select {
		case seen, ok = <-w.Events():
			if !ok {
				t.Fatalf("the watch ended: %v", w.Err())
			}
			return true
		case <-time.After(100 * time.Millisecond):
			return false
		}
	})
	puts := ct.count(live)
	if seen.Key != "open/early" {
		t.Fatalf("first event %+v", seen)
	}
	time.Sleep(time.Until(start.Add(timeout + 200*time.Millisecond)))
	if _, err := c.Put(ctxFor(t, callTimeout), "open/late", []byte("v")); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("the open watch ended after Timeout: %v", w.Err())
			}
			if ev.Key != "open/late" {
				continue
			}
			// One watch request and one more put: the stream was not cut.
			if got := ct.count(live) - puts; got != 1 {
				t.Fatalf("%d requests to the node since the watch opened, want 1 (the late put): the open watch was cut and opened again", got)
			}
			return
		case <-time.After(callTimeout):
			t.Fatal("no event for the late put")
		}
	}
}
