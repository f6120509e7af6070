package client

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/api/leasehold"
)

// SessionMode chooses how a client sends its acquires, renewals and
// releases (Config.Session).
type SessionMode int

const (
	// SessionDefault is SessionOn: measured on one machine, the stream
	// costs about 20% less CPU per operation than batched unary calls
	// with one goroutine, half with 16 sharing a client, a third less
	// with 64, and carries more operations a second in each (see the
	// docs/benchmarks.md, "The session stream").
	SessionDefault SessionMode = iota
	// SessionOn sends them, and the calls Config.Session names, on one
	// session stream per client (HTTP/2), pipelined and answered out of
	// order; a waiting acquire (or Begin, or Receive) waits on the
	// stream. Where a stream cannot be opened (an HTTP/1.1-only proxy or
	// transport, a server without the Sessions service) the client sends
	// them as unary calls and tries the stream again a minute later.
	SessionOn
	// SessionOff sends them as unary Batch calls.
	SessionOff
)

// errNoSession says an op was not sent on a session stream: the caller
// sends it as a unary call.
var errNoSession = errors.New("client: no session stream")

// errMoved ends a stream to a follower whose first answers named a leader
// among the client's endpoints: its unanswered ops go there.
var errMoved = errors.New("client: session stream moves to the leader")

const (
	// sessionFallback is how long a client sends unary calls after a
	// stream could not be opened.
	sessionFallback = time.Minute
	// sessionMaxMessage is the most ops sent in one message.
	sessionMaxMessage = leasehold.MaxBatchOps
)

// session carries a client's lease ops on one stream to the node in use.
// Every op unanswered when the stream breaks is sent again, with the same
// request ID, on the next stream (to the next node): the server answers a
// retried request from its first answer, so nothing acts twice.
type session struct {
	c       *Client
	clients []leaseholdv1connect.SessionsClient // by endpoint

	mu       sync.Mutex
	pending  map[uint64]*sessionCall // unanswered ops, by op id
	nextID   uint64
	queue    []*sessionCall // ops not sent on the current stream yet
	cancels  []uint64       // waiting acquires whose caller left
	wake     chan struct{}  // the sender has something to send
	running  bool           // a runner owns the stream
	offUntil time.Time      // unary calls until then
	off      time.Duration  // the last pause; 0 after a stream answered
	runner   sync.WaitGroup
}

// sessionCall is one op waiting for its answer.
type sessionCall struct {
	op    *pb.SessionOp
	waits bool      // an acquire with a wait: answered when its wait ends
	sent  time.Time // when it went out on the current stream
	res   *pb.SessionResult
	err   error
	done  chan struct{}
}

func newSession(c *Client, hc *http.Client, opts []connect.ClientOption) *session {
	s := &session{c: c, pending: map[uint64]*sessionCall{}, wake: make(chan struct{}, 1)}
	for _, e := range c.nodes {
		s.clients = append(s.clients, leaseholdv1connect.NewSessionsClient(hc, e.url, opts...))
	}
	return s
}

// do sends op on the stream (opening it if none is open) and waits for its
// answer, or returns errNoSession if the op is to go as a unary call. A
// caller that leaves withdraws its op from the stream: a waiting acquire
// is canceled on the server (which withdraws its place in line, as for a
// unary caller that went away), and nothing is sent again for it.
func (s *session) do(ctx context.Context, op *pb.BatchOp) (*pb.BatchResult, error) {
	r, err := s.doOp(ctx, &pb.SessionOp{Op: op}, op.GetAcquire().GetWait().AsDuration() > 0)
	if err != nil {
		return nil, err
	}
	return r.GetResult(), nil
}

// doOp is do for any op (a lease op or a call); waits says it may wait
// for its answer longer than RequestTimeout (its caller cancels it on the
// server when it leaves). It sets op.Id.
func (s *session) doOp(ctx context.Context, op *pb.SessionOp, waits bool) (*pb.SessionResult, error) {
	s.mu.Lock()
	// Past the node's limit of unanswered ops, or while streams fail, the
	// op goes as a unary call.
	if s.c.closed.Load() || len(s.pending) >= leasehold.MaxSessionOps || time.Now().Before(s.offUntil) {
		s.mu.Unlock()
		return nil, errNoSession
	}
	s.nextID++
	op.Id = s.nextID
	sc := &sessionCall{op: op, done: make(chan struct{}), waits: waits}
	s.pending[sc.op.Id] = sc
	s.queue = append(s.queue, sc)
	if !s.running {
		s.running = true
		s.runner.Add(1)
		go s.run()
	}
	s.mu.Unlock()
	s.poke()
	select {
	case <-sc.done:
		return sc.res, sc.err
	case <-ctx.Done():
		s.mu.Lock()
		if s.pending[sc.op.Id] == sc {
			delete(s.pending, sc.op.Id)
			if sc.waits {
				s.cancels = append(s.cancels, sc.op.Id)
			}
		}
		s.mu.Unlock()
		s.poke()
		return nil, s.c.ended(ctx, nil)
	}
}

func (s *session) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run keeps a stream open while ops are unanswered. A stream that
// answered and then broke is opened again on the next node, and its
// unanswered ops sent again. A stream that could not be opened, or broke
// before its first answer, sends its ops back to be sent as unary calls
// (with the same request IDs: they move to another node on their own),
// and the next stream is tried only after a pause that doubles, up to
// sessionFallback, while streams keep failing so.
func (s *session) run() {
	defer s.runner.Done()
	var retry backoff
	for {
		i := int(s.c.cur.Load()) % len(s.c.nodes)
		answered, err := s.serve(i)
		s.mu.Lock()
		if answered {
			retry, s.off = backoff{}, 0
		}
		switch {
		case s.c.closed.Load():
			s.failAll(ErrClosed)
		case errors.Is(err, errMoved):
			// Not a failure: the ops it left unanswered are sent again, with
			// their request IDs, on a stream to the leader.
			s.mu.Unlock()
			s.c.log.Debug("session stream moves to the leader", "from", s.c.nodes[i].url,
				"to", s.c.nodes[int(s.c.cur.Load())%len(s.c.nodes)].url)
			continue
		case err == nil && len(s.pending) == 0:
			// Ended with nothing unanswered (idle): the next op opens a
			// new stream.
		case err == nil:
			// The server ended the stream as an op came: open another.
			s.mu.Unlock()
			continue
		case answered && (retryable(err) || !connect.IsWireError(err)):
			// A stream that worked broke (a broken connection may end in
			// any code that is not the server's).
			s.mu.Unlock()
			s.c.log.Debug("session stream broke; sending its unanswered ops again", "node", s.c.nodes[i].url, "err", err)
			if !s.c.moveOn(s.c.bg, i, retry.next()) {
				s.mu.Lock()
				s.failAll(ErrClosed)
				s.running = false
				s.mu.Unlock()
				return
			}
			continue
		case cannotStream(err) || retryable(err):
			s.off = min(max(2*s.off, time.Second), sessionFallback)
			if cannotStream(err) {
				s.off = sessionFallback
			}
			s.c.log.Info("no session stream to this node; sending unary calls for a while",
				"node", s.c.nodes[i].url, "for", s.off, "err", err)
			s.offUntil = time.Now().Add(s.off)
			s.failAll(errNoSession)
		default:
			s.failAll(api.FromConnect(err))
		}
		s.running = false
		s.mu.Unlock()
		return
	}
}

// failAll answers every unanswered op with err. s.mu is held.
func (s *session) failAll(err error) {
	for id, sc := range s.pending {
		sc.err = err
		close(sc.done)
		delete(s.pending, id)
	}
	s.queue, s.cancels = nil, nil
}

// serve runs one stream to node i until it ends: it sends every
// unanswered op first, then new ops and cancels as they come, and hands
// out the answers. It reports whether any answer came, and why the stream
// ended (nil: the server ended it, or nothing was left to send).
func (s *session) serve(i int) (answered bool, err error) {
	ctx, cancel := context.WithCancel(s.c.bg)
	defer cancel()
	s.mu.Lock()
	first := make([]*pb.SessionOp, 0, len(s.pending))
	now := time.Now()
	for _, sc := range s.pending {
		sc.sent = now
		first = append(first, sc.op)
	}
	s.queue, s.cancels = nil, nil
	s.mu.Unlock()
	if len(first) == 0 {
		return false, nil
	}
	slices.SortFunc(first, func(a, b *pb.SessionOp) int { return cmp.Compare(a.Id, b.Id) })
	st := s.clients[i].Session(ctx)
	if s.c.cfg.Token != "" {
		st.RequestHeader().Set("Authorization", "Bearer "+s.c.cfg.Token)
	}
	sent := make(chan error, 1)
	go func() { sent <- s.send(ctx, st, first) }()
	var late, heard atomic.Bool
	go s.watch(ctx, time.Now(), &heard, func() { late.Store(true); cancel() })
	for {
		msg, err := st.Receive()
		if err != nil {
			cancel()
			if serr := <-sent; serr != nil && !errors.Is(serr, io.EOF) && !errors.Is(err, io.EOF) {
				s.c.log.Debug("session send failed", "err", serr)
			}
			_ = st.CloseResponse()
			if errors.Is(err, io.EOF) {
				return answered, nil
			}
			if late.Load() {
				// Ended by the watchdog: an op went unanswered too long.
				err = &leasehold.Error{Code: leasehold.CodeUnavailable, Message: "the session stream stopped answering"}
			}
			return answered, err
		}
		heard.Store(true)
		for _, r := range msg.GetResults() {
			s.deliver(r)
		}
		if !answered {
			answered = true
			if s.toLeader(st.ResponseHeader().Get(leaderHeader), i) {
				cancel()
				<-sent
				_ = st.CloseResponse()
				return true, errMoved
			}
		}
	}
}

// toLeader makes the node that leader (an answer's Leasehold-Leader) names
// the current endpoint and reports true if it is one of the client's
// endpoints other than node i. A stream to a follower costs the follower
// a relay per message; a client that knows only the follower keeps it.
func (s *session) toLeader(leader string, i int) bool {
	leader = strings.TrimRight(leader, "/")
	if leader == "" || leader == s.c.nodes[i].url {
		return false
	}
	for j := range s.c.nodes {
		if s.c.nodes[j].url == leader {
			s.c.cur.Store(int32(j))
			return true
		}
	}
	return false
}

// send sends first, then what do and its callers queue, until ctx ends.
func (s *session) send(ctx context.Context, st *connect.BidiStreamForClient[pb.SessionRequest, pb.SessionResponse], first []*pb.SessionOp) error {
	defer st.CloseRequest()
	for len(first) > 0 {
		k := min(len(first), sessionMaxMessage)
		if err := st.Send(&pb.SessionRequest{Ops: first[:k]}); err != nil {
			return err
		}
		first = first[k:]
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		}
		// Woken by the first op of a burst, the sender would run at once
		// (the waker's next goroutine) and send it alone: yielding first
		// lets the callers already runnable (woken by the last answers)
		// queue theirs, so they share one message.
		runtime.Gosched()
		s.mu.Lock()
		var ops []*pb.SessionOp
		now := time.Now()
		for _, sc := range s.queue {
			if s.pending[sc.op.Id] == sc { // its caller may have left
				sc.sent = now
				ops = append(ops, sc.op)
			}
		}
		cancels := s.cancels
		s.queue, s.cancels = nil, nil
		s.mu.Unlock()
		for len(ops) > 0 || len(cancels) > 0 {
			k := min(len(ops), sessionMaxMessage)
			if err := st.Send(&pb.SessionRequest{Ops: ops[:k], Cancel: cancels}); err != nil {
				return err
			}
			ops, cancels = ops[k:], nil
		}
	}
}

// watch ends the stream (cancel) when an op that does not wait has gone
// unanswered for RequestTimeout, as a unary attempt's timeout would: a
// stream can hang on a half-open connection. It also ends a stream that
// answered nothing and, RequestTimeout after it opened, has no op left
// (their callers left): over HTTP/1.1 a connection that broke before the
// answer leaves the stream waiting for ever, since net/http waits for the
// request body to end and only a cancel ends it.
func (s *session) watch(ctx context.Context, opened time.Time, heard *atomic.Bool, cancel context.CancelFunc) {
	limit := s.c.cfg.RequestTimeout
	t := time.NewTicker(limit / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		late := len(s.pending) == 0 && !heard.Load() && time.Since(opened) > limit
		for _, sc := range s.pending {
			if !sc.waits && !sc.sent.IsZero() && time.Since(sc.sent) > limit {
				late = true
				break
			}
		}
		s.mu.Unlock()
		if late {
			cancel()
			return
		}
	}
}

// deliver hands an answer to its op's caller, if the caller still waits.
func (s *session) deliver(r *pb.SessionResult) {
	s.mu.Lock()
	sc := s.pending[r.GetId()]
	delete(s.pending, r.GetId())
	s.mu.Unlock()
	if sc == nil {
		return // its caller left
	}
	sc.res = r
	if e := r.GetResult().GetError(); e != nil {
		sc.err = api.FromBatchError(e)
	}
	close(sc.done)
}

// stop waits for the runner, which ends when the client closes.
func (s *session) stop() { s.runner.Wait() }

// retryable says a stream ended in a way that leaves its ops' outcome
// unknown and worth sending again elsewhere: the node is unavailable, or
// the connection broke.
func retryable(err error) bool {
	if errors.Is(api.FromConnect(err), leasehold.ErrUnavailable) {
		return true
	}
	if connect.IsWireError(err) {
		return false
	}
	switch connect.CodeOf(err) {
	case connect.CodeCanceled, connect.CodeDeadlineExceeded, connect.CodeUnavailable:
		return true
	}
	return false
}

// cannotStream says a stream could not be opened at all: the server has
// no Sessions service (unimplemented, not found), a transport or proxy
// speaks only HTTP/1.1 (connect's unimplemented, or an HTTP status such as
// 505 that maps to no code), or the node has no room for another stream.
func cannotStream(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeUnimplemented, connect.CodeNotFound, connect.CodeResourceExhausted:
		return true
	case connect.CodeUnknown, connect.CodeInternal:
		return !connect.IsWireError(err)
	}
	return false
}
