package server

import (
	"context"
	"time"

	"connectrpc.com/connect"

	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/service"
)

// Batch answers up to leasehold.MaxBatchOps acquires, renewals and
// releases in one request, committed in one log entry. Each operation is
// checked and answered as its own RPC would be, and an invalid one fails
// alone. The one difference: an acquire that must wait does not block the
// batch. It takes its place in line and is answered queued; the caller then
// sends the same AcquireRequest (same request_id and secret) to Acquire,
// which finds that place (a retried request ID re-attaches to its waiter)
// and waits for the grant. A place nobody follows up within withdrawGrace
// is withdrawn, as for any caller that went away.
func (h leases) Batch(ctx context.Context, req *connect.Request[pb.BatchRequest]) (*connect.Response[pb.BatchResponse], error) {
	s := h.s
	ops := req.Msg.GetOps()
	if err := checkOpCount(len(ops)); err != nil {
		return nil, err
	}
	run, err := s.commitBatch(ctx, ops, false)
	if err != nil {
		return nil, err
	}
	if forwarding(req, run.err) {
		// The leader checks, counts and answers every operation; the ops
		// carry the request IDs and secrets chosen here.
		return nil, run.err
	}
	for _, it := range run.queued() {
		s.svc.HoldPlace(it.acquire)
	}
	out := &pb.BatchResponse{Results: run.answers(s)}
	if err := run.failure(); err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

// checkOpCount refuses a batch of no operations or too many.
func checkOpCount(n int) error {
	switch {
	case n == 0:
		return leasehold.Errorf(leasehold.CodeInvalid,
			"ops is empty: a batch needs 1 to %d operations (acquire, renew or release)", leasehold.MaxBatchOps)
	case n > leasehold.MaxBatchOps:
		return leasehold.Errorf(leasehold.CodeInvalid,
			"ops holds %d operations; the limit is %d: split the batch", n, leasehold.MaxBatchOps)
	}
	return nil
}

// batchRun is the operations of one Batch (or of one message of a
// session stream) on their way through the node.
type batchRun struct {
	items []batchItem
	start time.Time
	err   error // a failure of the whole proposal
	left  error // the answer of acquires withdrawn because the caller left
}

// commitBatch checks ops as their own RPCs do, charges the acquires to the
// caller's rate limit and commits the valid ones in one proposal. A
// refusal by the rate limit is returned, with nothing proposed; a failure
// of the proposal is run.err (it may be that this node does not lead: see
// forwarding). waitHere says that a queued acquire will be waited for on
// this node, by the caller of commitBatch, rather than by the client's
// follow-up Acquire, so it needs no request_id and secret of its own.
func (s *Server) commitBatch(ctx context.Context, ops []*pb.BatchOp, waitHere bool) (*batchRun, error) {
	run := &batchRun{items: make([]batchItem, len(ops)), start: time.Now()}
	var cmds []service.Command
	who := caller(ctx)
	for i, op := range ops {
		it := &run.items[i]
		if cmd := it.prepare(s, i, op, who, waitHere); cmd != nil {
			it.index = len(cmds)
			cmds = append(cmds, cmd)
		}
	}
	if err := s.charge(ctx, validAcquires(run.items)); err != nil {
		return nil, err
	}
	results, err := s.svc.Batch(ctx, cmds)
	switch {
	case err != nil && ctx.Err() != nil:
		// The caller left while the batch was being committed: its acquires
		// may have queued, or been granted, with nobody to take the answer.
		var acquires []*service.Acquire
		for i := range run.items {
			if a := run.items[i].acquire; a != nil && run.items[i].err == nil {
				acquires = append(acquires, a)
			}
		}
		run.err = s.svc.LeftEarly(ctx, acquires...)
	case err != nil:
		run.err = err
	default:
		var taken []*service.Acquire
		for i := range run.items {
			it := &run.items[i]
			if it.err != nil {
				continue
			}
			it.res = results[it.index]
			if it.acquire != nil && ctx.Err() != nil && (it.res.Lease != nil || it.res.Queued) {
				it.left = true
				taken = append(taken, it.acquire)
			}
		}
		if len(taken) > 0 {
			// Granted or queued as the caller left: nobody will take these.
			run.left = s.svc.LeftEarly(ctx, taken...)
		}
	}
	return run, nil
}

// queued are the acquires that took a place in line for their caller.
func (run *batchRun) queued() []*batchItem {
	var out []*batchItem
	for i := range run.items {
		if it := &run.items[i]; run.err == nil && it.err == nil && !it.left && it.acquire != nil && it.res.Queued {
			out = append(out, it)
		}
	}
	return out
}

// answers builds every operation's result, counting each as its own RPC.
func (run *batchRun) answers(s *Server) []*pb.BatchResult {
	out := make([]*pb.BatchResult, len(run.items))
	for i := range run.items {
		whole := run.err
		if run.items[i].left {
			whole = run.left
		}
		out[i] = s.batchAnswer(&run.items[i], whole, run.start)
	}
	return out
}

// failure is the failure of the whole call, if any.
func (run *batchRun) failure() error {
	if run.err != nil {
		return run.err
	}
	return run.left
}

// batchItem is one operation of a batch on its way through.
type batchItem struct {
	acquire *service.Acquire // ask.Base()
	ask     service.Ask      // the acquire to propose: a lock's or a semaphore's
	secret  string           // the acquire's secret, for its answer
	renew   *service.Renew
	release *service.Release
	err     error          // the operation is invalid: it was not proposed
	index   int            // its command's place in the proposal
	res     service.Result // what the state machine answered
	left    bool           // an acquire withdrawn because the caller went away
}

// prepare checks op (the i-th) as its own RPC does and returns the command
// to propose, or nil with it.err set. Request IDs and secrets chosen here
// are written back into op, so a batch forwarded to the leader carries
// them.
func (it *batchItem) prepare(s *Server, i int, op *pb.BatchOp, caller string, waitHere bool) service.Command {
	switch o := op.GetOp().(type) {
	case *pb.BatchOp_Acquire:
		if o.Acquire == nil {
			break
		}
		m := o.Acquire
		it.ask, it.secret, it.err = acquireCommand(m, caller)
		if it.err == nil {
			it.acquire = it.ask.Base()
		}
		if it.err == nil && !waitHere && it.acquire.Wait > 0 && (m.RequestId == "" || m.Secret == "") {
			// A queued answer carries neither, and only the same request
			// (same request_id and secret) can wait for that place in line.
			it.err = leasehold.Errorf(leasehold.CodeInvalid,
				"an acquire with a wait in a batch needs its own request_id and secret: if it queues, "+
					"the caller waits for the grant by sending the same request to Acquire")
		}
		if it.err != nil {
			it.acquire = &service.Acquire{} // marks the kind, for the metrics
			return nil
		}
		m.RequestId, m.Secret = it.acquire.RequestID, it.secret
		return it.ask
	case *pb.BatchOp_Renew:
		if o.Renew == nil {
			break
		}
		if it.renew, it.err = renewCommand(o.Renew, caller); it.err != nil {
			it.renew = &service.Renew{}
			return nil
		}
		o.Renew.RequestId = it.renew.RequestID
		return it.renew
	case *pb.BatchOp_Release:
		if o.Release == nil {
			break
		}
		if it.release, it.err = releaseCommand(o.Release, caller); it.err != nil {
			it.release = &service.Release{}
			return nil
		}
		o.Release.RequestId = it.release.RequestID
		return it.release
	}
	it.err = leasehold.Errorf(leasehold.CodeInvalid,
		"operation %d sets none of acquire, renew or release", i)
	return nil
}

// batchAnswer builds one operation's result, counting it as its own RPC
// would be counted. whole is a failure of the whole call (or, for an
// acquire withdrawn because its caller left, that answer).
func (s *Server) batchAnswer(it *batchItem, whole error, start time.Time) *pb.BatchResult {
	if it.err != nil {
		switch {
		case it.acquire != nil:
			s.metrics.Acquisitions.WithLabelValues("invalid").Inc()
		case it.renew != nil:
			s.metrics.RenewalFailures.WithLabelValues(leasehold.CodeInvalid.String()).Inc()
		}
		return batchError(it.err)
	}
	switch {
	case it.acquire != nil:
		if whole == nil && it.res.Err == nil && it.res.Queued {
			s.metrics.Acquisitions.WithLabelValues("queued").Inc()
			return &pb.BatchResult{Result: &pb.BatchResult_Queued{Queued: true}}
		}
		r, err := s.acquireAnswer(it.secret, it.res, whole, start)
		if err != nil {
			return batchError(err)
		}
		return &pb.BatchResult{Result: &pb.BatchResult_Acquire{Acquire: r}}
	case it.renew != nil:
		r, err := s.renewAnswer(it.res, whole)
		if err != nil {
			return batchError(err)
		}
		return &pb.BatchResult{Result: &pb.BatchResult_Renew{Renew: r}}
	default:
		r, err := s.releaseAnswer(it.release, it.res, whole)
		if err != nil {
			return batchError(err)
		}
		return &pb.BatchResult{Result: &pb.BatchResult_Release{Release: r}}
	}
}

func batchError(err error) *pb.BatchResult {
	return &pb.BatchResult{Result: &pb.BatchResult_Error{Error: api.ToBatchError(err)}}
}
