package client

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// unaryTransport carries the client's unary calls to http:// endpoints
// over HTTP/1.1 connections it keeps, one request at a time per
// connection, written and read on the caller's goroutine. net/http's
// Transport hands every request to a writer goroutine and every response
// back from a reader goroutine, and that machinery costs more CPU than the
// rest of the client spends on a call (measured: a quarter of the client's
// CPU per acquire+release, BenchmarkUnaryTransport).
//
// Only unary Connect requests with a small body of known length take this
// path (Content-Type application/proto or application/json, up to
// maxUnaryBody); streams, TLS, large bodies and anything else go to next,
// unchanged.
type unaryTransport struct {
	next *http.Transport
	dial func(ctx context.Context, network, addr string) (net.Conn, error)

	mu     sync.Mutex
	idle   map[string][]*unaryConn // by host:port, most recently used last
	closed bool
}

// unaryConn is one kept connection.
type unaryConn struct {
	conn   net.Conn
	br     *bufio.Reader
	bw     *bufio.Writer
	idleAt time.Time
}

const (
	// maxIdleUnaryConns bounds the connections kept per node, as
	// MaxIdleConnsPerHost does for next.
	maxIdleUnaryConns = 256
	// unaryIdleTimeout drops a connection idle this long: well before a
	// node closes it (server.Server's IdleTimeout is 2 minutes), so a
	// request is never written into a connection the node is closing.
	unaryIdleTimeout = 30 * time.Second
	// maxUnaryBody is the largest request body sent this way. The request
	// is written whole before its answer is read, so a node that refuses a
	// body early (over max_request_bytes) must have room to take it in:
	// the socket's buffers, and net/http reads up to 256 KiB of a body a
	// handler left. Larger requests go to next, which reads the answer
	// while it writes.
	maxUnaryBody = 64 << 10
)

func newUnaryTransport(next *http.Transport) *unaryTransport {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return &unaryTransport{next: next, dial: d.DialContext, idle: map[string][]*unaryConn{}}
}

// takes reports whether req is one for the unary path.
func (t *unaryTransport) takes(req *http.Request) bool {
	if req.URL.Scheme != "http" || req.Method != http.MethodPost || req.ContentLength < 0 ||
		req.ContentLength > maxUnaryBody || req.Header.Get("Upgrade") != "" {
		return false
	}
	switch req.Header.Get("Content-Type") {
	case "application/proto", "application/json":
		return true
	}
	return false
}

// RoundTrip sends req and reads its response's head. The connection is
// kept for another request once the body has been read to its end, and
// closed if the body is closed early, the node says Connection: close, or
// req's context ends first.
func (t *unaryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.takes(req) {
		return t.next.RoundTrip(req)
	}
	ctx := req.Context()
	host := req.URL.Host
	uc, err := t.get(ctx, host)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	// Ending ctx aborts a read or write in progress; the connection is not
	// kept after that.
	cancelled := false
	stop := context.AfterFunc(ctx, func() { uc.conn.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*http.Response, error) {
		if !stop() {
			cancelled = true
		}
		uc.conn.Close()
		if cancelled || ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if err := req.Write(uc.bw); err != nil {
		return fail(err)
	}
	if err := uc.bw.Flush(); err != nil {
		return fail(err)
	}
	resp, err := http.ReadResponse(uc.br, req)
	if err != nil {
		return fail(err)
	}
	resp.Body = &unaryBody{body: resp.Body, t: t, host: host, uc: uc, stop: stop, ctx: ctx, keep: !resp.Close}
	return resp, nil
}

// get returns a kept connection to host that the node has not closed, or
// dials a new one.
func (t *unaryTransport) get(ctx context.Context, host string) (*unaryConn, error) {
	now := time.Now()
	for {
		t.mu.Lock()
		l := t.idle[host]
		if len(l) == 0 {
			t.mu.Unlock()
			break
		}
		uc := l[len(l)-1]
		l[len(l)-1] = nil
		t.idle[host] = l[:len(l)-1]
		t.mu.Unlock()
		if now.Sub(uc.idleAt) < unaryIdleTimeout && alive(uc.conn) {
			return uc, nil
		}
		uc.conn.Close()
	}
	c, err := t.dial(ctx, "tcp", host)
	if err != nil {
		return nil, err
	}
	return &unaryConn{conn: c, br: bufio.NewReader(c), bw: bufio.NewWriter(c)}, nil
}

// put keeps uc for the next request to host, and closes the connections
// to host idle for longer than unaryIdleTimeout (the oldest come first), so
// that a client whose load fell does not keep them open.
func (t *unaryTransport) put(host string, uc *unaryConn) {
	uc.idleAt = time.Now()
	var drop []*unaryConn
	t.mu.Lock()
	l := t.idle[host]
	for len(l) > 0 && uc.idleAt.Sub(l[0].idleAt) >= unaryIdleTimeout {
		drop = append(drop, l[0])
		l[0] = nil
		l = l[1:]
	}
	if !t.closed && len(l) < maxIdleUnaryConns {
		l = append(l, uc)
	} else {
		drop = append(drop, uc)
	}
	t.idle[host] = l
	t.mu.Unlock()
	for _, c := range drop {
		c.conn.Close()
	}
}

// CloseIdleConnections closes the kept connections, and next's; after it
// no connection is kept (Client.Close).
func (t *unaryTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle, t.closed = map[string][]*unaryConn{}, true
	t.mu.Unlock()
	for _, l := range idle {
		for _, uc := range l {
			uc.conn.Close()
		}
	}
	t.next.CloseIdleConnections()
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// unaryBody is a response body that gives its connection back at its end.
type unaryBody struct {
	body io.ReadCloser
	t    *unaryTransport
	host string
	uc   *unaryConn
	stop func() bool
	ctx  context.Context
	keep bool        // the node did not ask to close the connection
	done atomic.Bool // the connection was given back or closed
}

func (b *unaryBody) Read(p []byte) (int, error) {
	if b.done.Load() {
		return 0, io.EOF
	}
	n, err := b.body.Read(p)
	switch {
	case err == io.EOF:
		b.finish(true)
	case err != nil:
		b.finish(false)
		if b.ctx.Err() != nil {
			err = b.ctx.Err()
		}
	}
	return n, err
}

// Close ends the body. Before its end the connection still holds the rest
// of the response, so it is closed rather than kept. It may be called
// while a Read is under way (a call abandoned by its context).
func (b *unaryBody) Close() error {
	b.finish(false)
	return nil
}

func (b *unaryBody) finish(atEnd bool) {
	if !b.done.CompareAndSwap(false, true) {
		return
	}
	if b.stop() && atEnd && b.keep && b.uc.br.Buffered() == 0 {
		b.t.put(b.host, b.uc)
		return
	}
	b.uc.conn.Close()
}
