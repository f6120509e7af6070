package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/cluster"
)

// DefaultSessionIdle ends a session stream that has nothing unanswered
// and has sent nothing for this long (Config.SessionIdle).
const DefaultSessionIdle = 5 * time.Minute

// sessionsAPI implements leaseholdv1connect.SessionsHandler.
type sessionsAPI struct{ s *Server }

// Session serves one client's stream of lease ops. Each message's ops are
// checked, charged and committed as one Batch (commitBatch, the code
// Batch runs), from a goroutine of their own, so that the ops of many
// messages and streams ride in shared commits (the node's proposal
// batching); a queued acquire then waits on this node as a unary Acquire
// would, and is answered when it ends. On a follower the ops go to the
// leader as the Go client's own unary calls would (a Batch, then an
// Acquire for each queued one), carrying the request IDs chosen here: the
// stream works through any node, and the retry rules are the unary ones.
// The header of relayed answers names the leader (Leasehold-Leader), so a
// client that lists it moves its stream there.
// A failure that makes an op's outcome unknown (no leader, a lost leader)
// ends the stream with unavailable; the client sends its unanswered ops
// again, with the same request IDs, on a new stream.
func (h sessionsAPI) Session(ctx context.Context, stream *connect.BidiStream[pb.SessionRequest, pb.SessionResponse]) error {
	s := h.s
	key := rateKeyOf(ctx, stream.Peer().Addr)
	if err := s.sessions.open(key, s.maxConns, s.maxConnsPerClient); err != nil {
		s.refused("max_sessions")
		return api.ToConnect(err)
	}
	defer s.sessions.close(key)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ss := &session{s: s, ctx: ctx, stream: stream, fwdHdr: s.fwd.forwardHeader(stream.RequestHeader(), stream.Peer().Addr),
		ops: map[uint64]context.CancelFunc{}, wake: make(chan struct{}, 1), failed: make(chan error, 1)}
	return ss.run(cancel)
}

// session is one stream on its way.
type session struct {
	s      *Server
	ctx    context.Context // ends with the stream: every op's context derives from it
	stream *connect.BidiStream[pb.SessionRequest, pb.SessionResponse]
	fwdHdr http.Header // of the requests relayed to the leader

	mu     sync.Mutex
	ops    map[uint64]context.CancelFunc // unanswered ops, by op id
	out    []*pb.SessionResult           // answers not sent yet
	wake   chan struct{}                 // the sender has answers to send
	failed chan error                    // ends the stream: an op's outcome is unknown
	work   sync.WaitGroup                // goroutines committing or waiting
	leader string                        // the leader's API URL, once a relay learned it

	headed bool // the sender sent the response header (sender only)
}

func (ss *session) run(cancel context.CancelFunc) error {
	msgs, ended := make(chan *pb.SessionRequest), make(chan error, 1)
	go func() {
		for {
			m, err := ss.stream.Receive()
			if err != nil {
				ended <- err
				return
			}
			select {
			case msgs <- m:
			case <-ss.ctx.Done():
				return
			}
		}
	}()
	sent := make(chan error, 1)
	stopSending := make(chan struct{})
	go func() { sent <- ss.send(stopSending) }()
	// Whatever ends the stream, every op's context ends with it (a waiter
	// is withdrawn as a unary caller's is), and nothing is sent after the
	// handler returns.
	defer func() {
		cancel()
		ss.work.Wait()
		close(stopSending)
		<-sent
	}()
	idle := time.NewTimer(ss.s.sessionIdle)
	defer idle.Stop()
	for {
		select {
		case m := <-msgs:
			ss.handle(m)
			idle.Reset(ss.s.sessionIdle)
		case err := <-ended:
			if !errors.Is(err, io.EOF) {
				return err
			}
			// The client sends no more: answer what it sent (the deferred
			// stop sends the last answers), then end.
			ss.work.Wait()
			return nil
		case err := <-ss.failed:
			return api.ToConnect(err)
		case err := <-sent:
			sent <- err // for the deferred wait
			return err
		case <-idle.C:
			if ss.unanswered() == 0 {
				return nil
			}
			idle.Reset(ss.s.sessionIdle)
		case <-ss.ctx.Done():
			if ss.s.base.Err() != nil {
				// This node is shutting down: the client sends what is
				// unanswered elsewhere.
				return api.ToConnect(leasehold.Errorf(leasehold.CodeUnavailable,
					"this node is shutting down; send the unanswered ops again on another node"))
			}
			return nil
		}
	}
}

// handle starts the ops of one message, and cancels those it names.
func (ss *session) handle(m *pb.SessionRequest) {
	for _, id := range m.GetCancel() {
		ss.mu.Lock()
		stop := ss.ops[id]
		ss.mu.Unlock()
		if stop != nil {
			stop()
		}
	}
	ops := m.GetOps()
	if len(ops) == 0 {
		return
	}
	if err := checkOpCount(len(ops)); err != nil {
		for _, op := range ops {
			ss.refuse(op.GetId(), batchError(err))
		}
		return
	}
	var admitted []sessionOp
	for _, op := range ops {
		if op.GetCall() != nil {
			ss.startCall(op)
			continue
		}
		if err := ss.allowed(op.GetOp()); err != nil {
			ss.refuse(op.GetId(), batchError(err))
			continue
		}
		if o, err := ss.admit(op); err != nil {
			ss.refuse(op.GetId(), batchError(err))
		} else {
			admitted = append(admitted, o)
		}
	}
	if len(admitted) > 0 {
		ss.work.Add(1)
		go ss.commit(admitted)
	}
}

// sessionOp is one admitted op: its context ends with a cancel for it
// or with the stream.
type sessionOp struct {
	id  uint64
	op  *pb.BatchOp
	ctx context.Context
}

// admit counts op among the unanswered ones, or refuses it.
func (ss *session) admit(op *pb.SessionOp) (sessionOp, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	id := op.GetId()
	switch {
	case ss.ops[id] != nil:
		return sessionOp{}, leasehold.Errorf(leasehold.CodeInvalid,
			"op id %d is already used by an unanswered op of this stream: give each op its own id", id)
	case len(ss.ops) >= leasehold.MaxSessionOps:
		return sessionOp{}, leasehold.Errorf(leasehold.CodeLimit,
			"this stream already has %d unanswered ops (limit %d per session); wait for answers before sending more",
			len(ss.ops), leasehold.MaxSessionOps)
	}
	ctx, cancel := context.WithCancel(ss.ctx)
	ss.ops[id] = cancel
	return sessionOp{id: id, op: op.GetOp(), ctx: ctx}, nil
}

// allowed checks op as the guard checks a Batch of it alone.
func (ss *session) allowed(op *pb.BatchOp) error {
	return principalOf(ss.ctx).authorize(leaseholdv1connect.LeasesBatchProcedure, &pb.BatchRequest{Ops: []*pb.BatchOp{op}})
}

// commit runs ops as one Batch, and waits for those that queued.
func (ss *session) commit(ops []sessionOp) {
	defer ss.work.Done()
	s := ss.s
	msgs := make([]*pb.BatchOp, len(ops))
	for i := range ops {
		msgs[i] = ops[i].op
	}
	run, err := s.commitBatch(ss.ctx, msgs, true)
	if err != nil { // refused by the rate limit
		for _, o := range ops {
			ss.answer(o.id, batchError(err))
		}
		return
	}
	if addr, ok := leaderOf(run.err); ok {
		// prepare wrote the request IDs and secrets into msgs.
		ss.relay(addr, ops, msgs)
		return
	}
	if ss.lost(run.failure()) {
		return
	}
	waiting := map[*batchItem]bool{}
	for _, it := range run.queued() {
		waiting[it] = true
	}
	results := run.answers(s)
	for i, o := range ops {
		it := &run.items[i]
		if !waiting[it] {
			ss.answer(o.id, results[i])
			continue
		}
		s.svc.HoldPlace(it.acquire) // claimed at once by the Acquire below
		ss.work.Add(1)
		go func() {
			defer ss.work.Done()
			res, err := s.svc.Acquire(o.ctx, it.ask)
			r, err := s.acquireAnswer(it.secret, res, err, run.start)
			ss.settle(o.id, &pb.BatchResult{Result: &pb.BatchResult_Acquire{Acquire: r}}, err)
		}()
	}
}

// relay sends ops to the leader at raft address addr as the Go client's
// unary calls would: one Batch, then an Acquire for each one queued.
func (ss *session) relay(addr string, ops []sessionOp, msgs []*pb.BatchOp) {
	s := ss.s
	resp, err := s.fwd.call(ss.ctx, addr, api.Lookup(leaseholdv1connect.LeasesBatchProcedure), &pb.BatchRequest{Ops: msgs}, ss.fwdHdr)
	var results []*pb.BatchResult
	if err == nil {
		if results = resp.Any().(*pb.BatchResponse).GetResults(); len(results) != len(ops) {
			err = leasehold.Errorf(leasehold.CodeUnavailable, "the leader answered %d ops with %d results; send them again", len(ops), len(results))
		}
	}
	if err != nil {
		ss.lost(err)
		return
	}
	ss.mu.Lock()
	ss.leader = resp.Header().Get(LeaderHeader)
	ss.mu.Unlock()
	acquire := api.Lookup(leaseholdv1connect.LeasesAcquireProcedure)
	for i, o := range ops {
		if res := results[i]; !res.GetQueued() {
			ss.answer(o.id, res)
			continue
		}
		ss.work.Add(1)
		go func() {
			defer ss.work.Done()
			r, err := s.fwd.call(o.ctx, addr, acquire, o.op.GetAcquire(), ss.fwdHdr)
			var res *pb.BatchResult
			if err == nil {
				res = &pb.BatchResult{Result: &pb.BatchResult_Acquire{Acquire: r.Any().(*pb.AcquireResponse)}}
			}
			ss.settle(o.id, res, err)
		}()
	}
}

// settle answers op id with res, or with err if it failed.
func (ss *session) settle(id uint64, res *pb.BatchResult, err error) {
	if err != nil {
		if ss.lost(err) {
			return
		}
		res = batchError(err)
	}
	ss.answer(id, res)
}

// lost ends the stream if err leaves an op's outcome unknown (no leader,
// leadership lost, this node shutting down): the client sends its
// unanswered ops again elsewhere, with the same request IDs. It reports
// whether the stream is ending (the stream's context ended, or err).
func (ss *session) lost(err error) bool {
	if ss.ctx.Err() != nil {
		return true
	}
	if err == nil || !errors.Is(api.FromConnect(api.ToConnect(err)), leasehold.ErrUnavailable) {
		return false
	}
	select {
	case ss.failed <- err:
	default:
	}
	return true
}

// answer queues an admitted op's result for the sender and forgets the
// op.
func (ss *session) answer(id uint64, res *pb.BatchResult) {
	ss.answerCall(&pb.SessionResult{Id: id, Result: res})
}

// answerCall is answer for an op's whole SessionResult.
func (ss *session) answerCall(r *pb.SessionResult) {
	ss.mu.Lock()
	if stop := ss.ops[r.Id]; stop != nil {
		stop()
		delete(ss.ops, r.Id)
	}
	ss.mu.Unlock()
	ss.queueOut(r)
}

// refuse queues the answer to an op that was never admitted (its id may
// be another op's, which stays unanswered).
func (ss *session) refuse(id uint64, res *pb.BatchResult) {
	ss.queueOut(&pb.SessionResult{Id: id, Result: res})
}

// queueOut queues an answer for the sender.
func (ss *session) queueOut(r *pb.SessionResult) {
	ss.mu.Lock()
	ss.out = append(ss.out, r)
	unsent := len(ss.out)
	ss.mu.Unlock()
	if unsent > 2*leasehold.MaxSessionOps {
		// The client sends ops but does not read their answers.
		select {
		case ss.failed <- leasehold.Errorf(leasehold.CodeLimit,
			"%d answers wait for this stream's client to read them (limit %d); read the answers", unsent, 2*leasehold.MaxSessionOps):
		default:
		}
	}
	select {
	case ss.wake <- struct{}{}:
	default:
	}
}

func (ss *session) unanswered() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.ops)
}

// send sends the answers as they come, all those waiting in one message,
// until stop closes; then it sends what is left.
func (ss *session) send(stop <-chan struct{}) error {
	for {
		select {
		case <-ss.wake:
			// As the client's sender does: let the goroutines answering
			// other ops of the same commit queue theirs, for one message.
			runtime.Gosched()
			if err := ss.flush(); err != nil {
				return err
			}
		case <-stop:
			return ss.flush() // what the last ops answered
		}
	}
}

func (ss *session) flush() error {
	ss.mu.Lock()
	out, leader := ss.out, ss.leader
	ss.out = nil
	ss.mu.Unlock()
	if len(out) == 0 {
		return nil
	}
	if !ss.headed {
		// The header goes out with the first answers. On a follower that
		// relayed them it names the leader (as a forwarded unary answer
		// does), so a client that lists the leader moves its stream there
		// instead of paying for the relay.
		ss.headed = true
		if leader != "" {
			ss.stream.ResponseHeader().Set(LeaderHeader, leader)
		}
	}
	return ss.stream.Send(&pb.SessionResponse{Results: out})
}

// leaderOf returns the leader's raft address if err says this node does
// not lead and a leader is known (a stream is never itself forwarded).
func leaderOf(err error) (string, bool) {
	var nl *cluster.NotLeaderError
	if !errors.As(err, &nl) || nl.LeaderAddr == "" {
		return "", false
	}
	return nl.LeaderAddr, true
}
