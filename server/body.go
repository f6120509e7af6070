package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/api"
)

// bodyGuard bounds what request bodies may cost a node: the size of one
// body, the bytes that all bodies in flight may hold together (refused at
// once when spent, never queued), and the time one body may take to
// arrive. A decoded request costs several times its body, so these bound
// the memory that requests can take, whoever sends them.
type bodyGuard struct {
	max     int64         // bytes in one body (≤ 0: no limit)
	budget  int64         // bytes in all bodies in flight (≤ 0: no limit)
	timeout time.Duration // for one body to arrive (≤ 0: no limit)
	held    atomic.Int64  // bytes of bodies in flight
	errors  *connect.ErrorWriter
	refused func(limit string) // counts a refusal
}

// wrap guards the bodies of requests to next, a Connect handler. A body's
// bytes stay charged until next returns, since the decoded request lives
// that long; a waiting Acquire's body is a few hundred bytes.
func (g *bodyGuard) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.max > 0 && r.ContentLength > g.max {
			// Refused before reading a byte of it.
			g.refused("max_request_bytes")
			g.errors.Write(w, r, api.ToConnect(tooLarge(r.ContentLength, g.max)))
			return
		}
		b := &guardedBody{g: g, body: r.Body, rc: http.NewResponseController(w), length: r.ContentLength}
		defer b.release()
		if r.ContentLength > 0 && !b.take(r.ContentLength) {
			g.refused("max_inflight_body_bytes")
			g.errors.Write(w, r, api.ToConnect(g.busy()))
			return
		}
		// The deadline covers the body only: it is lifted at its end, so a
		// waiting Acquire can wait as long as it asked to. (net/http lifts
		// it too on HTTP/1 connections, when its background read starts.)
		b.deadline = g.timeout > 0 && b.rc.SetReadDeadline(time.Now().Add(g.timeout)) == nil
		// A copy: net/http decides whether the connection can be reused
		// from the original request's body, which it must still see.
		r2 := *r
		r2.Body = b
		next.ServeHTTP(w, &r2)
	})
}

// tooLarge refuses a body of n bytes (0: of unknown length, found over
// the limit while reading it).
func tooLarge(n, max int64) error {
	size := fmt.Sprintf("is %d bytes", n)
	if n == 0 {
		size = "is larger than that"
	}
	return leasehold.Errorf(leasehold.CodeLimit,
		"a request body may hold %d bytes (limit max_request_bytes); this one %s: send fewer operations per request", max, size)
}

func (g *bodyGuard) busy() error {
	return leasehold.Errorf(leasehold.CodeLimit,
		"this node is already reading %d bytes of request bodies (limit max_inflight_body_bytes); retry shortly or on another node", g.budget)
}

// guardedBody is a request body that charges its bytes to the node's
// budget, ends at the size limit, and lifts the read deadline at its end.
type guardedBody struct {
	g        *bodyGuard
	body     io.ReadCloser
	rc       *http.ResponseController
	length   int64 // Content-Length, or -1 when unknown (gRPC, chunked)
	read     int64
	charged  int64
	deadline bool // a read deadline is set
}

func (b *guardedBody) take(n int64) bool {
	if b.g.held.Add(n) > b.g.budget && b.g.budget > 0 {
		b.g.held.Add(-n)
		return false
	}
	b.charged += n
	return true
}

func (b *guardedBody) release() { b.g.held.Add(-b.charged) }

func (b *guardedBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	b.read += int64(n)
	switch {
	case b.g.max > 0 && b.read > b.g.max:
		b.g.refused("max_request_bytes")
		return n, api.ToConnect(tooLarge(0, b.g.max))
	case b.read > b.charged && !b.take(b.read-b.charged):
		b.g.refused("max_inflight_body_bytes")
		return n, api.ToConnect(b.g.busy())
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.g.refused("body_timeout")
		return n, connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf(
			"the request body did not arrive within %v (%d bytes came); send it at once", b.g.timeout, b.read))
	case err == io.EOF && b.deadline:
		b.rc.SetReadDeadline(time.Time{})
		b.deadline = false
	}
	return n, err
}

func (b *guardedBody) Close() error { return b.body.Close() }
