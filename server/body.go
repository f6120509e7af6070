package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/api/leasehold"
)

// bodyGuard bounds what request bodies may cost a node, in the bytes they
// decode to: a compressed body or message is inflated as it is read and
// cut off at the limit, never inflated whole first. It bounds the bytes of
// one request (a stream: of one message), those that all bodies in flight
// may hold together and those that one client address may hold of them
// (charged as they arrive, refused at once when spent, never queued), and
// the time one body (a stream: one message) may take to arrive. A decoded
// request costs several times its body, so these bound the memory that
// requests can take, whoever sends them.
//
// It is the only decoder of requests: connect's own decompressor is
// replaced by one that refuses (decodedHere), so nothing is inflated
// without being counted.
type bodyGuard struct {
	budget    int64         // bytes of all bodies in flight (≤ 0: no limit)
	perClient int64         // bytes of them one client address may hold (≤ 0: no limit)
	timeout   time.Duration // for one body, or one message of a stream, to arrive (≤ 0: no limit)
	errors    *connect.ErrorWriter
	refused   func(limit string) // counts a refusal

	mu       sync.Mutex
	held     int64            // bytes of bodies in flight
	byClient map[string]int64 // of which each client address holds
}

func newBodyGuard(budget, maxRequest int64, timeout time.Duration, errors *connect.ErrorWriter, refused func(string)) *bodyGuard {
	return &bodyGuard{budget: budget, perClient: clientShare(budget, maxRequest), timeout: timeout,
		errors: errors, refused: refused, byClient: map[string]int64{}}
}

// clientShare is the part of the budget one client address may hold: a
// quarter, or one request of the largest size if that is more, so that a
// few clients that send and stall cannot hold the whole budget, and one
// client can still send the largest request.
func clientShare(budget, maxRequest int64) int64 {
	if budget <= 0 {
		return 0
	}
	return max(budget/4, maxRequest)
}

// bodyLimit is what the bodies of one service may hold once decoded.
type bodyLimit struct {
	max  int64  // bytes in one request, or one message of a stream (≤ 0: no limit)
	name string // how a refusal names the limit
	// stream: the body is a bidi stream, which lasts as long as its client:
	// the body timeout bounds each message from its first byte, not the
	// body, and its messages are charged one at a time.
	stream bool
}

// smallRequestBytes bounds the requests of the services whose requests
// are small (cluster, admin, elections, watch, groups).
const smallRequestBytes = 64 << 10

// requestLimits are the limits of requests once decoded: large for the
// services whose requests can be (batches, values, queue messages), small
// for the others, session for each message of a session stream.
func requestLimits(maxRequest int64) (large, small, session bodyLimit) {
	large = bodyLimit{max: maxRequest, name: "max_request_bytes"}
	small = bodyLimit{max: smallRequestBytes, name: "of this service, whose requests are small"}
	if maxRequest > 0 && maxRequest <= smallRequestBytes {
		small = large
	}
	session = large
	session.stream = true
	return large, small, session
}

// wrap guards the bodies of requests to next, a Connect handler of a
// service whose requests are bounded by lim. A body's bytes stay charged
// until next returns, since the decoded request lives that long (a
// waiting Acquire's body is a few hundred bytes); a stream's message, until
// the next one starts.
func (g *bodyGuard) wrap(lim bodyLimit, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		client := clientIP(r.RemoteAddr)
		if fromNode(r.Context()) {
			client = "" // a request another node passed on was charged to its caller there
		}
		b := g.newBody(lim, r.Header, r.Body, client)
		b.rc = http.NewResponseController(w)
		if b.rawMax > 0 && r.ContentLength > b.rawMax {
			// Refused before reading a byte of it. A declared length is
			// never charged: bytes are charged as they arrive.
			g.errors.Write(w, r, b.refuse("max_request_bytes", lim.tooLarge(r.ContentLength)))
			return
		}
		defer g.giveBack(b, true)
		// A copy: net/http decides whether the connection can be reused
		// from the original request's body, which it must still see.
		r2 := *r
		r2.Body = b
		if b.inflated {
			// Connect sees the body decoded; it answers compressed as it
			// would have for a compressed request.
			r2.Header = r.Header.Clone()
			r2.Header.Del("Content-Encoding")
			if r2.Header.Get("Accept-Encoding") == "" {
				r2.Header.Set("Accept-Encoding", "gzip")
			}
		}
		// The deadline covers the body only: it is lifted at its end, so a
		// waiting Acquire can wait as long as it asked to. (net/http lifts
		// it too on HTTP/1 connections, when its background read starts.)
		if !lim.stream {
			b.setDeadline()
		}
		next.ServeHTTP(w, &r2)
	})
}

// tooLarge refuses a request of n bytes (0: found over the limit while
// reading or decoding it).
func (l bodyLimit) tooLarge(n int64) error {
	what, size := "a request body", fmt.Sprintf("is %d bytes", n)
	if l.stream {
		what = "a message of this stream"
	}
	if n == 0 {
		size = "is larger than that"
	}
	return leasehold.Errorf(leasehold.CodeLimit,
		"%s may hold %d bytes once decoded (limit %s); this one %s: send fewer operations per request", what, l.max, l.name, size)
}

// guardedBody is a request body as connect reads it: decoded, charged to
// the node's budget as it is decoded, ended at the size limit and at the
// deadline, with the deadline lifted at its end.
type guardedBody struct {
	g        *bodyGuard
	lim      bodyLimit
	client   string // the client address charged; "": a request from another node (no share)
	body     io.ReadCloser
	rc       *http.ResponseController // nil: no deadline (tests)
	decode   io.Reader                // what Read serves: the body decoded
	inflated bool                     // the body is compressed whole, and decode inflates it
	raw      int64                    // bytes read of the body
	rawMax   int64                    // bytes the body may hold as it comes (≤ 0: bounded per message)
	decoded  int64                    // bytes decoded of the body, or of a stream's message
	rawErr   error                    // the last error of the body itself
	deadline bool                     // a read deadline is set
	refusal  error                    // the body was refused: nothing more is read

	charged int64 // bytes charged to the budget (guarded by g.mu)
	done    bool  // given back for good: the handler returned (guarded by g.mu)
}

// newBody guards body, of a request with header h from client.
func (g *bodyGuard) newBody(lim bodyLimit, h http.Header, body io.ReadCloser, client string) *guardedBody {
	b := &guardedBody{g: g, lim: lim, body: body, client: client}
	enveloped, encoding := encodingOf(h)
	b.inflated = !enveloped && encoding == "gzip"
	b.decode = b.decoder(enveloped, encoding)
	return b
}

func (b *guardedBody) Read(p []byte) (int, error) {
	if b.refusal != nil {
		return 0, b.refusal
	}
	return b.decode.Read(p)
}

func (b *guardedBody) Close() error { return b.body.Close() }

// decoder reads the body as connect must see it: a body of one message
// (Connect's unary protocol) is inflated whole if compressed; a body of
// messages (gRPC, gRPC-Web, Connect streams) has each compressed message
// inflated and handed over as an uncompressed one (envelopes).
func (b *guardedBody) decoder(enveloped bool, encoding string) io.Reader {
	if enveloped {
		e := &envelopes{b: b, gzip: encoding == "gzip"}
		e.f.b = b
		return e
	}
	b.rawMax = b.lim.max
	if encoding == "gzip" {
		return meter{b, &inflater{b: b, in: arrival{b}}}
	}
	// Another encoding is passed on for connect to refuse: it has none.
	return meter{b, arrival{b}}
}

// arrival is the body as it comes, with the deadline's end made a clear
// error and the deadline lifted at its end.
type arrival struct{ b *guardedBody }

func (a arrival) Read(p []byte) (int, error) {
	b := a.b
	n, err := b.body.Read(p)
	b.raw += int64(n)
	if err != nil {
		b.rawErr = err
	}
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		what := "the request body"
		if b.lim.stream {
			what = "a message of this stream"
		}
		return 0, b.refuse("body_timeout", connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf(
			"%s did not arrive within %v (limit body_timeout; %d bytes came); send it at once", what, b.g.timeout, b.raw)))
	case b.rawMax > 0 && b.raw > b.rawMax:
		// A compressed body is bounded as it comes too, so that one that
		// decodes to nothing cannot be sent forever.
		return 0, b.refuse("max_request_bytes", b.lim.tooLarge(0))
	case err == io.EOF:
		b.liftDeadline()
	}
	return n, err
}

// meter counts and charges the decoded bytes read through it.
type meter struct {
	b  *guardedBody
	in io.Reader
}

func (m meter) Read(p []byte) (int, error) {
	n, err := m.in.Read(p)
	if err != nil && err != io.EOF {
		return n, err // the body ends here: its bytes need no charge
	}
	if cerr := m.b.count(n); cerr != nil {
		return n, cerr
	}
	return n, err
}

// count charges n more decoded bytes, or ends the body over a limit.
func (b *guardedBody) count(n int) error {
	if n == 0 {
		return nil
	}
	b.decoded += int64(n)
	if b.lim.max > 0 && b.decoded > b.lim.max {
		return b.refuse("max_request_bytes", b.lim.tooLarge(0))
	}
	if limit, err := b.g.charge(b, int64(n)); err != nil {
		return b.refuse(limit, err)
	}
	return nil
}

// refuse ends the body over a limit: it counts the refusal and stops
// reading the body (stopReading). The first refusal is the body's answer.
func (b *guardedBody) refuse(limit string, err error) error {
	if b.refusal != nil {
		return b.refusal
	}
	if limit != "" {
		b.g.refused(limit)
	}
	b.setReadDeadline(time.Now().Add(refusedDrain))
	b.deadline, b.refusal = false, api.ToConnect(err)
	return b.refusal
}

// refusedDrain ends the reading of a refused request's body soon: net/http
// reads up to 256 KiB of what is left of a body before it answers, so that
// a client still sending reads the answer instead of a reset connection;
// a client that stalls holds the answer up this long, not until the body
// timeout.
const refusedDrain = 250 * time.Millisecond

// setReadDeadline sets the connection's read deadline for this body, unless
// its handler returned: a session's reader may still be reading a message
// sent before, and the ResponseWriter is gone then (HTTP/2's races with its
// end and panics after it). g.mu orders it with giveBack's done, which the
// handler sets before it returns.
func (b *guardedBody) setReadDeadline(t time.Time) bool {
	b.g.mu.Lock()
	defer b.g.mu.Unlock()
	return b.rc != nil && !b.done && b.rc.SetReadDeadline(t) == nil
}

// charge takes n bytes of the budget for b, or names the limit it would
// pass and refuses them.
func (g *bodyGuard) charge(b *guardedBody, n int64) (limit string, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case b.done:
		// The handler returned: nothing reads this body any more.
		return "", errors.New("the request was answered")
	case g.budget > 0 && g.held+n > g.budget:
		return "max_inflight_body_bytes", leasehold.Errorf(leasehold.CodeLimit,
			"this node is already reading %d bytes of request bodies (limit max_inflight_body_bytes); retry shortly or on another node", g.held)
	case b.client != "" && g.perClient > 0 && g.byClient[b.client]+n > g.perClient:
		return "max_inflight_body_bytes_per_client", leasehold.Errorf(leasehold.CodeLimit,
			"%s is already sending %d bytes of request bodies to this node (limit max_inflight_body_bytes_per_client: %d, its share of max_inflight_body_bytes); wait for answers before sending more",
			b.client, g.byClient[b.client], g.perClient)
	}
	g.held += n
	b.charged += n
	if b.client != "" {
		g.byClient[b.client] += n
	}
	return "", nil
}

// giveBack returns the bytes b holds to the budget; done: for good, it
// takes no more.
func (g *bodyGuard) giveBack(b *guardedBody, done bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held -= b.charged
	if b.client != "" {
		if g.byClient[b.client] -= b.charged; g.byClient[b.client] == 0 {
			delete(g.byClient, b.client)
		}
	}
	b.charged = 0
	b.done = b.done || done
}

// inFlight is the bytes of bodies in flight.
func (g *bodyGuard) inFlight() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}

func (b *guardedBody) setDeadline() {
	b.deadline = b.g.timeout > 0 && b.refusal == nil && b.setReadDeadline(time.Now().Add(b.g.timeout))
}

func (b *guardedBody) liftDeadline() {
	if b.deadline {
		b.setReadDeadline(time.Time{})
		b.deadline = false
	}
}
