package server

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/leasehold/leasehold"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// call runs a session op that carries a unary call (SessionOp.call) as
// that call runs: the guard's role and prefix checks, then the very
// handler, which validates, charges and commits it; on a follower, a
// relay to the leader as the unary call's forward, with the request IDs
// and secrets the handler chose. Calls of many streams commit together
// through the node's proposal batching, as concurrent unary calls do.
func (ss *session) call(o sessionOp, c any) {
	defer ss.work.Done()
	s := ss.s
	r := &pb.SessionResult{Id: o.id}
	var err error
	switch c := c.(type) {
	case *pb.SessionOp_QueueSend:
		var res *pb.QueuesSendResponse
		res, err = runCall(ss, o.ctx, leaseholdv1connect.QueuesSendProcedure, c.QueueSend, s.queues.Send)
		r.Call = &pb.SessionResult_QueueSend{QueueSend: res}
	case *pb.SessionOp_QueueSendBatch:
		var res *pb.QueuesSendBatchResponse
		res, err = runCall(ss, o.ctx, leaseholdv1connect.QueuesSendBatchProcedure, c.QueueSendBatch, s.queues.SendBatch)
		r.Call = &pb.SessionResult_QueueSendBatch{QueueSendBatch: res}
	case *pb.SessionOp_QueueReceive:
		var res *pb.QueuesReceiveResponse
		res, err = runCall(ss, o.ctx, leaseholdv1connect.QueuesReceiveProcedure, c.QueueReceive, s.queues.Receive)
		r.Call = &pb.SessionResult_QueueReceive{QueueReceive: res}
	case *pb.SessionOp_QueueAck:
		var res *pb.QueuesAckResponse
		res, err = runCall(ss, o.ctx, leaseholdv1connect.QueuesAckProcedure, c.QueueAck, s.queues.Ack)
		r.Call = &pb.SessionResult_QueueAck{QueueAck: res}
	case *pb.SessionOp_QueueNack:
		var res *pb.QueuesNackResponse
		res, err = runCall(ss, o.ctx, leaseholdv1connect.QueuesNackProcedure, c.QueueNack, s.queues.Nack)
		r.Call = &pb.SessionResult_QueueNack{QueueNack: res}
	case *pb.SessionOp_QueueAckBatch:
		var res *pb.QueuesAckBatchResponse
		res, err = runCall(ss, o.ctx, leaseholdv1connect.QueuesAckBatchProcedure, c.QueueAckBatch, s.queues.AckBatch)
		r.Call = &pb.SessionResult_QueueAckBatch{QueueAckBatch: res}
	case *pb.SessionOp_IdemBegin:
		var res *pb.IdempotencyBeginResponse
		res, err = runCall(ss, o.ctx, leaseholdv1connect.IdempotencyBeginProcedure, c.IdemBegin, s.idem.Begin)
		r.Call = &pb.SessionResult_IdemBegin{IdemBegin: res}
	case *pb.SessionOp_IdemComplete:
		var res *pb.IdempotencyCompleteResponse
		res, err = runCall(ss, o.ctx, leaseholdv1connect.IdempotencyCompleteProcedure, c.IdemComplete, s.idem.Complete)
		r.Call = &pb.SessionResult_IdemComplete{IdemComplete: res}
	case *pb.SessionOp_IdemAbandon:
		var res *pb.IdempotencyAbandonResponse
		res, err = runCall(ss, o.ctx, leaseholdv1connect.IdempotencyAbandonProcedure, c.IdemAbandon, s.idem.Abandon)
		r.Call = &pb.SessionResult_IdemAbandon{IdemAbandon: res}
	case *pb.SessionOp_GroupAckRevocation:
		var res *pb.GroupsAckRevocationResponse
		res, err = runCall(ss, o.ctx, leaseholdv1connect.GroupsAckRevocationProcedure, c.GroupAckRevocation, s.groups.AckRevocation)
		r.Call = &pb.SessionResult_GroupAckRevocation{GroupAckRevocation: res}
	default:
		err = leasehold.Errorf(leasehold.CodeInvalid, "op %d names a call this node does not know; update the node", o.id)
	}
	if err != nil {
		if ss.lost(err) {
			return
		}
		r.Call, r.Result, r.RetryAfter = nil, batchError(err), retryAfter(err)
	}
	ss.answerCall(r)
}

// runCall is one call's run on a session: what the guard checks, the
// handler h, and the forward to the leader (see call).
func runCall[Req, Res any](ss *session, ctx context.Context, procedure string, msg *Req,
	h func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error)) (*Res, error) {
	if err := ss.authorize(procedure, msg); err != nil {
		return nil, err
	}
	res, err := h(ctx, connect.NewRequest(msg))
	if addr, ok := leaderOf(err); ok {
		c := client[Req, Res](ss.s.fwd, addr, procedure)
		r, err := relay(c.CallUnary(ctx, forwardedWith(ss.s.fwd, ss.hdr, msg)))
		if err != nil {
			return nil, err
		}
		ss.mu.Lock()
		ss.leader = r.Header().Get(LeaderHeader)
		ss.mu.Unlock()
		return r.Msg, nil
	}
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// authorize is the guard's check of a unary call (the stream's token was
// authenticated when it opened): the role the procedure needs, and a
// worker's prefixes.
func (ss *session) authorize(procedure string, msg any) error {
	p, ok := ss.ctx.Value(principalKey{}).(Principal)
	if !ok {
		p = anonymous
	}
	need, ok := required[procedure]
	if !ok {
		need = RoleAdmin
	}
	if p.Role < need {
		return leasehold.Errorf(leasehold.CodePermission, "token %q has role %s; %s needs %s", p.Name, p.Role, procedure, need)
	}
	if p.Role == RoleWorker {
		return p.mayTouch(names(msg))
	}
	return nil
}

// retryAfter is the QueueRetryAfter detail of a refused send, if err has
// one.
func retryAfter(err error) *pb.QueueRetryAfter {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return nil
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if ra, ok := v.(*pb.QueueRetryAfter); ok {
				return ra
			}
		}
	}
	return nil
}

// startCall admits an op that carries a call and runs it on a goroutine
// of its own (a Begin or a Receive may wait), or refuses it.
func (ss *session) startCall(op *pb.SessionOp, c any) {
	if op.GetOp() != nil {
		ss.refuse(op.GetId(), batchError(leasehold.Errorf(leasehold.CodeInvalid,
			"op %d sets both op and call: send them as two ops", op.GetId())))
		return
	}
	o, err := ss.admit(op)
	if err != nil {
		ss.refuse(op.GetId(), batchError(err))
		return
	}
	ss.work.Add(1)
	go ss.call(o, c)
}
