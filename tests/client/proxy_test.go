package client_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// resetProxy forwards loopback TCP connections to a real node. Armed, it
// resets (RST) the client's connection once, as a node that crashes with a
// request in its receive buffer does: either before the request reaches
// the node (dropRequest) or after the node answered but before the answer
// reaches the client (dropReply).
type resetProxy struct {
	ln     net.Listener
	target string

	dropRequest atomic.Bool
	dropReply   atomic.Bool
	resets      atomic.Int32
	// whileLost, if set, runs as a reply is dropped, before the reset:
	// what it does happens between the node's answer and the retry.
	whileLost atomic.Pointer[func()]
	// dropReplyTo, if set, arms dropReply when a request holding it (a
	// procedure's path) passes, once: to lose one call's reply when the
	// client makes others first.
	dropReplyTo atomic.Pointer[string]

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func startResetProxy(t testing.TB, targetURL string) *resetProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &resetProxy{ln: ln, target: targetURL[len("http://"):], conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *resetProxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *resetProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *resetProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *resetProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c) || !p.track(u) {
			c.Close()
			u.Close()
			return
		}
		p.wg.Add(2)
		go p.pipe(c, u, &p.dropRequest, c) // client -> node
		go p.pipe(u, c, &p.dropReply, c)   // node -> client
	}
}

// pipe copies src to dst; if drop is armed when bytes arrive, it resets
// client instead and ends both directions.
func (p *resetProxy) pipe(src, dst net.Conn, drop *atomic.Bool, client net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if to := p.dropReplyTo.Load(); to != nil && drop == &p.dropRequest && bytes.Contains(buf[:n], []byte(*to)) &&
				p.dropReplyTo.CompareAndSwap(to, nil) {
				p.dropReply.Store(true)
			}
			if drop.CompareAndSwap(true, false) {
				if f := p.whileLost.Load(); f != nil && drop == &p.dropReply {
					(*f)()
				}
				p.resets.Add(1)
				if tc, ok := client.(*net.TCPConn); ok {
					tc.SetLinger(0) // close with RST
				}
				src.Close()
				dst.Close()
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				src.Close()
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if tc, ok := dst.(*net.TCPConn); ok {
					tc.CloseWrite()
					return
				}
			}
			dst.Close()
			return
		}
	}
}

// TestRetryAfterConnectionReset: a connection reset is a transport failure
// like a refused dial. The client retries it on a fresh connection with the
// same request ID, and a reply lost after the node acted returns the first
// answer instead of acting twice (invariant 7).
func TestRetryAfterConnectionReset(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	p := startResetProxy(t, n.URL)
	c := newClient(t, client.Config{}, p.URL())
	direct := nodeClient(t, n)

	// A pooled connection to reuse.
	get(t, c, "reset/r")

	t.Run("request dropped", func(t *testing.T) {
		p.dropRequest.Store(true)
		ctx := ctxFor(t, callTimeout)
		l, err := c.Acquire(ctx, "reset/r", client.TTL(5*time.Second))
		if p.resets.Load() == 0 {
			t.Fatal("the proxy reset nothing; the test proves nothing")
		}
		if err != nil {
			t.Fatalf("Acquire whose first attempt met a connection reset: %v (code %v); want a retry that succeeds",
				err, leasehold.CodeOf(err))
		}
		hold(t, l)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("reply dropped", func(t *testing.T) {
		p.resets.Store(0)
		p.dropReply.Store(true)
		ctx := ctxFor(t, callTimeout)
		l, err := c.Acquire(ctx, "reset/r", client.TTL(5*time.Second))
		if p.resets.Load() == 0 {
			t.Fatal("the proxy reset nothing; the test proves nothing")
		}
		if err != nil {
			t.Fatalf("Acquire whose reply was lost to a connection reset: %v (code %v); want the retry to return the first grant",
				err, leasehold.CodeOf(err))
		}
		hold(t, l)
		h := holderOf(t, direct, "reset/r")
		if h.ID != l.ID() || h.Token != l.Token() {
			t.Fatalf("server holder %v; the client got lease %d token %d", h, l.ID(), l.Token())
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release of the lease granted by the first attempt: %v", err)
		}
	})
}
