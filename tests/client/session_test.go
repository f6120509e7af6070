package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testcluster"
)

// h2cCounter is a path counter whose transport speaks HTTP/2 without TLS
// (as the client's own session transport does) for every call.
func h2cCounter(t *testing.T) *pathCounter {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	t.Cleanup(tr.CloseIdleConnections)
	return &pathCounter{next: tr, hits: map[string]int{}}
}

// sessionClient is a client with the session stream on, over rt.
func sessionClient(t *testing.T, rt http.RoundTripper, cfg client.Config, endpoints ...string) *testClient {
	t.Helper()
	cfg.Session = client.SessionOn
	if rt == nil {
		// The client's own transports, closed by Close.
		cfg.Endpoints, cfg.Logger = endpoints, testcluster.Logger()
		c, err := client.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return &testClient{Client: c}
	}
	cfg.HTTPClient = &http.Client{Transport: rt}
	c := newClient(t, cfg, endpoints...)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestSessionCarriesEveryLeaseOp(t *testing.T) {
	n := startNode(t)
	pc := h2cCounter(t)
	c := sessionClient(t, pc, client.Config{}, n.URL)
	ctx := ctxFor(t, callTimeout)
	l, err := c.Acquire(ctx, "s/one", client.TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if h := holderOf(t, nodeClient(t, n), "s/one"); h.ID != 0 {
		t.Fatalf("released lease still held: %+v", h)
	}
	if pc.count("Session") != 1 || pc.count("Batch") != 0 || pc.count("Acquire") != 0 {
		t.Fatalf("want one Session stream and no unary lease calls, got %v", pc.hits)
	}
}

// Waiters queued on one resource over the stream are granted in the
// order they queued, each with a larger token, without unary follow-ups.
func TestSessionWaitingAcquiresGrantedInFIFOOrder(t *testing.T) {
	n := startNode(t)
	pc := h2cCounter(t)
	c := sessionClient(t, pc, client.Config{}, n.URL)
	direct := nodeClient(t, n)
	holder := mustAcquire(t, c, []string{"s/fifo"}, client.TTL(10*time.Second))
	const waiters = 4
	type grant struct {
		who   int
		token uint64
	}
	grants := make(chan grant, waiters)
	errs := make(chan error, waiters)
	for i := range waiters {
		go func() {
			ctx := ctxFor(t, 30*time.Second)
			l, err := c.Acquire(ctx, "s/fifo", client.TTL(10*time.Second), client.Wait(20*time.Second))
			if err != nil {
				errs <- err
				return
			}
			grants <- grant{i, l.Token()}
			l.Release(ctx)
		}()
		// The next waiter queues only once this one is in line.
		eventually(t, 10*time.Second, "the waiter in line", func() bool { return len(get(t, direct, "s/fifo").Waiters) == i+1 })
	}
	holder.Release(ctxFor(t, callTimeout))
	last := holder.Token()
	for i := range waiters {
		select {
		case g := <-grants:
			if g.who != i || g.token <= last {
				t.Fatalf("grant %d went to waiter %d with token %d (previous %d); want waiter %d, a larger token", i, g.who, g.token, last, i)
			}
			last = g.token
		case err := <-errs:
			t.Fatal(err)
		case <-time.After(20 * time.Second):
			t.Fatalf("only %d of %d waiters granted", i, waiters)
		}
	}
	if pc.count("Batch") != 0 || pc.count("Acquire") != 0 {
		t.Fatalf("waiting acquires used unary calls: %v", pc.hits)
	}
}

// A waiting acquire whose caller leaves is withdrawn from the line (after
// the server's grace), and a later release leaves the resource free rather
// than granting it to nobody.
func TestSessionCancelOfAWaitingAcquireWithdrawsIt(t *testing.T) {
	n := startNode(t)
	c := sessionClient(t, h2cCounter(t), client.Config{}, n.URL)
	direct := nodeClient(t, n)
	holder := mustAcquire(t, c, []string{"s/cancel"}, client.TTL(10*time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctx, "s/cancel", client.Wait(30*time.Second))
		done <- err
	}()
	eventually(t, 10*time.Second, "the waiter in line", func() bool { return len(get(t, direct, "s/cancel").Waiters) == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled acquire returned %v, want context.Canceled", err)
	}
	eventually(t, 10*time.Second, "the canceled waiter withdrawn", func() bool { return len(get(t, direct, "s/cancel").Waiters) == 0 })
	holder.Release(ctxFor(t, callTimeout))
	if h := holderOf(t, direct, "s/cancel"); h.ID != 0 {
		t.Fatalf("the withdrawn waiter was granted the resource: %+v", h)
	}
}

// A client whose transport speaks only HTTP/1.1, or that reaches the node
// through an HTTP/1.1-only proxy, or a server without the Sessions
// service, sends unary Batch calls instead, and does not try the stream
// again for every call.
func TestSessionFallsBackToUnary(t *testing.T) {
	n := startNode(t)
	// Each case gives the client's transport (nil: the client's own, with
	// HTTP/1.1 for unary calls and h2c for the stream), the endpoint, and
	// where the calls are counted.
	cases := map[string]func(t *testing.T) (http.RoundTripper, string, *pathCounter){
		"http1 transport": func(t *testing.T) (http.RoundTripper, string, *pathCounter) {
			pc := newPathCounter(t)
			return pc, n.URL, pc
		},
		"http1 proxy": func(t *testing.T) (http.RoundTripper, string, *pathCounter) {
			pc := &pathCounter{hits: map[string]int{}}
			return nil, http1Proxy(t, n.URL, pc, ""), pc
		},
		"no Sessions service": func(t *testing.T) (http.RoundTripper, string, *pathCounter) {
			pc := &pathCounter{hits: map[string]int{}}
			return nil, h2cProxy(t, n.URL, pc, "/leasehold.v1.Sessions/"), pc
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			rt, url, pc := setup(t)
			c := sessionClient(t, rt, client.Config{}, url)
			for i := range 3 {
				l := mustAcquire(t, c, []string{"s/fallback"}, client.TTL(10*time.Second))
				if err := l.Release(ctxFor(t, callTimeout)); err != nil {
					t.Fatalf("release %d: %v", i, err)
				}
			}
			if pc.count("Session") > 1 || pc.count("Batch") != 6 {
				t.Fatalf("want at most one Session attempt, then 6 Batch calls; got %v", pc.hits)
			}
		})
	}
}

// http1Proxy serves target through an HTTP/1.1-only reverse proxy that
// counts the calls in pc and answers 404 to paths under refuse.
func http1Proxy(t *testing.T, target string, pc *pathCounter, refuse string) string {
	return proxyWith(t, target, pc, refuse, false)
}

// h2cProxy is http1Proxy speaking HTTP/2 without TLS too.
func h2cProxy(t *testing.T, target string, pc *pathCounter, refuse string) string {
	return proxyWith(t, target, pc, refuse, true)
}

func proxyWith(t *testing.T, target string, pc *pathCounter, refuse string, h2c bool) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(h2c)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	srv := &http.Server{Protocols: &p, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		pc.mu.Lock()
		pc.hits[method]++
		pc.mu.Unlock()
		if refuse != "" && strings.HasPrefix(r.URL.Path, refuse) {
			http.NotFound(w, r)
			return
		}
		out, err := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.Path, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out.Header = r.Header.Clone()
		out.ContentLength = r.ContentLength
		resp, err := tr.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String()
}

// deafProxy forwards TCP to a node and can drop everything the node sends
// back (the node acts on requests, the client hears no answer) and close
// every connection.
type deafProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	deaf  bool
	conns []net.Conn
}

func newDeafProxy(t *testing.T, target string) *deafProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &deafProxy{ln: ln}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", strings.TrimPrefix(target, "http://"))
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go io.Copy(u, c)
			go func() {
				buf := make([]byte, 32<<10)
				for {
					k, err := u.Read(buf)
					if k > 0 && !p.isDeaf() {
						c.Write(buf[:k])
					}
					if err != nil {
						c.Close()
						return
					}
				}
			}()
		}
	}()
	return p
}

func (p *deafProxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *deafProxy) isDeaf() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.deaf
}

func (p *deafProxy) setDeaf(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deaf = on
}

// cut closes every connection open through the proxy.
func (p *deafProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Ops whose answers were lost with their stream are sent again on a new
// stream with the same request IDs: the acquire is answered with the one
// lease it got (not a second grant, not "held"), the release with its
// first answer (not "not found").
func TestSessionRetryOverReopenedStreamActsOnce(t *testing.T) {
	n := startNode(t)
	p := newDeafProxy(t, n.URL)
	pc := h2cCounter(t)
	c := sessionClient(t, pc, client.Config{RequestTimeout: 2 * time.Second}, p.URL())
	direct := nodeClient(t, n)
	a := mustAcquire(t, c, []string{"s/a"}, client.TTL(20*time.Second)) // the stream answers
	p.setDeaf(true)
	type acquired struct {
		l   *client.Lease
		err error
	}
	got, released := make(chan acquired, 1), make(chan error, 1)
	go func() {
		l, err := c.Acquire(ctxFor(t, 20*time.Second), "s/b", client.TTL(20*time.Second))
		got <- acquired{l, err}
	}()
	go func() { released <- a.Release(ctxFor(t, 20*time.Second)) }()
	// Both acted on the node; their answers are lost.
	var b client.LeaseInfo
	eventually(t, 10*time.Second, "the acquire and the release committed", func() bool {
		b = holderOf(t, direct, "s/b")
		return b.ID != 0 && holderOf(t, direct, "s/a").ID == 0
	})
	p.setDeaf(false)
	p.cut()
	r := <-got
	if r.err != nil {
		t.Fatalf("acquire sent again: %v (want the lease it got first)", r.err)
	}
	hold(t, r.l)
	if r.l.ID() != b.ID || r.l.Token() != b.Token {
		t.Fatalf("acquire answered lease %d token %d; the node granted lease %d token %d", r.l.ID(), r.l.Token(), b.ID, b.Token)
	}
	if err := <-released; err != nil {
		t.Fatalf("release sent again: %v (want its first answer)", err)
	}
	if h := holderOf(t, direct, "s/b"); h.ID != b.ID || h.Token != b.Token {
		t.Fatalf("after the retry s/b is held by %+v, want lease %d token %d", h, b.ID, b.Token)
	}
	if pc.count("Session") < 2 || pc.count("Batch") != 0 || pc.count("Acquire") != 0 || pc.count("Release") != 0 {
		t.Fatalf("want the ops sent again on a second stream, got %v", pc.hits)
	}
}

// A stream that stops answering ends nothing early on the node, and the
// client never extends its deadline past what an answered renewal gave:
// its lease ends locally, at its last safe deadline, while the node still
// holds it (extended by the renewals it committed but could not answer).
func TestSessionLostStreamEndsNothingEarlyRenewsNothingLate(t *testing.T) {
	n := startNode(t)
	p := newDeafProxy(t, n.URL)
	c := sessionClient(t, h2cCounter(t), client.Config{RequestTimeout: time.Second}, p.URL())
	direct := nodeClient(t, n)
	const ttl = 3 * time.Second
	l := mustAcquire(t, c, []string{"s/lost"}, client.TTL(ttl))
	deadline := l.Deadline()
	p.setDeaf(true)
	// Renewals keep going out (the holder keeps making progress); the node
	// commits them, the client hears nothing.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				l.Progress("")
			}
		}
	}()
	eventually(t, 10*time.Second, "a renewal committed", func() bool { return holderOf(t, direct, "s/lost").RenewCount > 0 })
	ended := waitDone(t, l, 3*ttl)
	if l.Deadline().After(deadline) {
		t.Fatalf("deadline moved from %v to %v without an answered renewal", deadline, l.Deadline())
	}
	if ended.Before(deadline) {
		t.Fatalf("lease ended locally at %v, before its deadline %v", ended, deadline)
	}
	if !errors.Is(l.Err(), client.ErrLeaseLost) {
		t.Fatalf("lease ended with %v, want ErrLeaseLost", l.Err())
	}
	if h := holderOf(t, direct, "s/lost"); h.ID != l.ID() {
		t.Fatalf("the node no longer holds the lease when the client gave it up (holder %+v): released early", h)
	}
}

// A waiting acquire whose stream breaks is sent again on the new stream
// and keeps its place in line: the old stream's withdrawal (after the
// grace) does not touch it, and it is granted before the waiter that
// queued after it.
func TestSessionWaiterKeepsItsPlaceOverAReopenedStream(t *testing.T) {
	n := startNode(t)
	p := newDeafProxy(t, n.URL)
	pc := h2cCounter(t)
	c := sessionClient(t, pc, client.Config{}, p.URL())
	direct := nodeClient(t, n)
	holder := mustAcquire(t, c, []string{"s/place"}, client.TTL(20*time.Second)) // the stream answers
	first, second := make(chan *client.Lease, 1), make(chan *client.Lease, 1)
	errs := make(chan error, 2)
	wait := func(c *testClient, to chan *client.Lease) {
		l, err := c.Acquire(ctxFor(t, 30*time.Second), "s/place", client.TTL(20*time.Second), client.Wait(25*time.Second))
		if err != nil {
			errs <- err
			return
		}
		to <- l
		l.Release(ctxFor(t, callTimeout))
	}
	go wait(c, first)
	eventually(t, 10*time.Second, "the first waiter in line", func() bool { return len(get(t, direct, "s/place").Waiters) == 1 })
	go wait(direct, second)
	eventually(t, 10*time.Second, "the second waiter in line", func() bool { return len(get(t, direct, "s/place").Waiters) == 2 })
	p.cut()
	// Past the grace after which the node withdraws what the broken
	// stream left waiting.
	time.Sleep(3 * time.Second)
	if w := len(get(t, direct, "s/place").Waiters); w != 2 {
		t.Fatalf("%d waiters after the stream broke, want both", w)
	}
	holder.Release(ctxFor(t, callTimeout))
	select {
	case l := <-first:
		if l.Token() <= holder.Token() {
			t.Fatalf("token %d after %d", l.Token(), holder.Token())
		}
	case l := <-second:
		t.Fatalf("the waiter behind was granted first (lease %d)", l.ID())
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(20 * time.Second):
		t.Fatal("the first waiter was never granted")
	}
	select {
	case <-second:
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(20 * time.Second):
		t.Fatal("the second waiter was never granted")
	}
	if pc.count("Session") < 2 || pc.count("Batch") != 0 || pc.count("Acquire") != 0 {
		t.Fatalf("want the waiting acquire sent again on a second stream, got %v", pc.hits)
	}
}
