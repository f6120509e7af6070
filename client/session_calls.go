package client

import (
	"context"
	"errors"
	"fmt"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
)

// onSession sends a unary call's request msg on the session stream, if the
// client has one open or can open one, and returns its answer; ok false
// says the call goes as a unary call (no session, a request the stream
// does not carry, or no stream to be had). An op unanswered when its
// stream breaks is sent again, with the same request, on the next stream:
// the request IDs and secrets it carries make the retry act once, as a
// unary retry does.
func onSession[Res any](ctx context.Context, c *Client, msg any) (res *Res, ok bool, err error) {
	s := c.session
	if s == nil {
		return nil, false, nil
	}
	op, waits := sessionCallOf(msg)
	if op == nil {
		return nil, false, nil
	}
	r, err := s.doOp(ctx, op, waits)
	switch {
	case errors.Is(err, errNoSession):
		return nil, false, nil
	case err != nil:
		if ra := r.GetRetryAfter(); ra != nil {
			err = &RetryAfterError{RetryAfter: max(dur(ra.RetryAfter), minRetryAfter), Err: err}
		}
		return nil, true, err
	}
	res, ok = sessionAnswerOf(r).(*Res)
	if !ok || res == nil {
		return nil, true, fmt.Errorf("leasehold: the node answered a %T on the session stream with %v", msg, r)
	}
	return res, true, nil
}

// sessionCallOf is the session op that carries a unary request, or nil for
// one the stream does not carry (Extend has no request ID to make a
// retry act once). waits says it may wait past RequestTimeout: a
// Begin or a Receive with a wait.
func sessionCallOf(msg any) (op *pb.SessionOp, waits bool) {
	switch m := msg.(type) {
	case *pb.QueuesSendRequest:
		return &pb.SessionOp{Call: &pb.SessionOp_QueueSend{QueueSend: m}}, false
	case *pb.QueuesSendBatchRequest:
		return &pb.SessionOp{Call: &pb.SessionOp_QueueSendBatch{QueueSendBatch: m}}, false
	case *pb.QueuesReceiveRequest:
		return &pb.SessionOp{Call: &pb.SessionOp_QueueReceive{QueueReceive: m}}, m.GetWait().AsDuration() > 0
	case *pb.QueuesAckRequest:
		return &pb.SessionOp{Call: &pb.SessionOp_QueueAck{QueueAck: m}}, false
	case *pb.QueuesNackRequest:
		return &pb.SessionOp{Call: &pb.SessionOp_QueueNack{QueueNack: m}}, false
	case *pb.QueuesAckBatchRequest:
		return &pb.SessionOp{Call: &pb.SessionOp_QueueAckBatch{QueueAckBatch: m}}, false
	case *pb.IdempotencyBeginRequest:
		return &pb.SessionOp{Call: &pb.SessionOp_IdemBegin{IdemBegin: m}}, m.GetWait().AsDuration() > 0
	case *pb.IdempotencyCompleteRequest:
		return &pb.SessionOp{Call: &pb.SessionOp_IdemComplete{IdemComplete: m}}, false
	case *pb.IdempotencyAbandonRequest:
		return &pb.SessionOp{Call: &pb.SessionOp_IdemAbandon{IdemAbandon: m}}, false
	case *pb.GroupsAckRevocationRequest:
		return &pb.SessionOp{Call: &pb.SessionOp_GroupAckRevocation{GroupAckRevocation: m}}, false
	}
	return nil, false
}

// sessionAnswerOf is the unary response a session result carries.
func sessionAnswerOf(r *pb.SessionResult) any {
	switch a := r.GetCall().(type) {
	case *pb.SessionResult_QueueSend:
		return a.QueueSend
	case *pb.SessionResult_QueueSendBatch:
		return a.QueueSendBatch
	case *pb.SessionResult_QueueReceive:
		return a.QueueReceive
	case *pb.SessionResult_QueueAck:
		return a.QueueAck
	case *pb.SessionResult_QueueNack:
		return a.QueueNack
	case *pb.SessionResult_QueueAckBatch:
		return a.QueueAckBatch
	case *pb.SessionResult_IdemBegin:
		return a.IdemBegin
	case *pb.SessionResult_IdemComplete:
		return a.IdemComplete
	case *pb.SessionResult_IdemAbandon:
		return a.IdemAbandon
	case *pb.SessionResult_GroupAckRevocation:
		return a.GroupAckRevocation
	}
	return nil
}
