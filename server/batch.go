package server

import (
	"context"
	"time"

	"connectrpc.com/connect"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
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
	start := time.Now()
	ops := req.Msg.GetOps()
	switch {
	case len(ops) == 0:
		return nil, leasehold.Errorf(leasehold.CodeInvalid,
			"ops is empty: a batch needs 1 to %d operations (acquire, renew or release)", leasehold.MaxBatchOps)
	case len(ops) > leasehold.MaxBatchOps:
		return nil, leasehold.Errorf(leasehold.CodeInvalid,
			"ops holds %d operations; the limit is %d: split the batch", len(ops), leasehold.MaxBatchOps)
	}
	items := make([]batchItem, len(ops))
	var cmds []service.Command
	who := caller(ctx)
	for i, op := range ops {
		it := &items[i]
		if cmd := it.prepare(s, i, op, who); cmd != nil {
			it.index = len(cmds)
			cmds = append(cmds, cmd)
		}
	}
	if err := s.charge(ctx, validAcquires(items)); err != nil {
		return nil, err
	}
	results, err := s.svc.Batch(ctx, cmds)
	if forwarding(req, err) {
		// The leader checks, counts and answers every operation; the ops
		// carry the request IDs and secrets chosen here.
		return nil, err
	}
	var left error // the caller went away with acquires granted or queued
	switch {
	case err != nil && ctx.Err() != nil:
		// The caller left while the batch was being committed: its acquires
		// may have queued, or been granted, with nobody to take the answer.
		var acquires []*service.Acquire
		for i := range items {
			if a := items[i].acquire; a != nil && items[i].err == nil {
				acquires = append(acquires, a)
			}
		}
		err = s.svc.LeftEarly(ctx, acquires...)
	case err == nil:
		var taken []*service.Acquire
		for i := range items {
			it := &items[i]
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
			left = s.svc.LeftEarly(ctx, taken...)
		}
		for i := range items {
			if it := &items[i]; it.err == nil && !it.left && it.acquire != nil && it.res.Queued {
				s.svc.HoldPlace(it.acquire)
			}
		}
	}
	out := &pb.BatchResponse{Results: make([]*pb.BatchResult, len(items))}
	for i := range items {
		whole := err
		if items[i].left {
			whole = left
		}
		out.Results[i] = s.batchAnswer(&items[i], whole, start)
	}
	if err == nil {
		err = left
	}
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

// batchItem is one operation of a batch on its way through.
type batchItem struct {
	acquire *service.Acquire
	secret  string // the acquire's secret, for its answer
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
func (it *batchItem) prepare(s *Server, i int, op *pb.BatchOp, caller string) service.Command {
	switch o := op.GetOp().(type) {
	case *pb.BatchOp_Acquire:
		if o.Acquire == nil {
			break
		}
		m := o.Acquire
		it.acquire, it.secret, it.err = acquireCommand(m, caller)
		if it.err == nil && it.acquire.Wait > 0 && (m.RequestId == "" || m.Secret == "") {
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
		return it.acquire
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
