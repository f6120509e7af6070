package server

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
)

// call runs a session op that carries a unary call (SessionOp.call) as
// that call runs: the guard's role and prefix checks, then the very
// handler, which validates, charges and commits it; on a follower, a
// relay to the leader as the unary call's forward, with the request IDs
// and secrets the handler chose. Calls of many streams commit together
// through the node's proposal batching, as concurrent unary calls do.
func (ss *session) call(o sessionOp, op *pb.SessionOp) {
	defer ss.work.Done()
	r := &pb.SessionResult{Id: o.id}
	var res proto.Message
	row, msg := api.CallOf(op)
	err := leasehold.Errorf(leasehold.CodeInvalid, "op %d names a call this node does not know; update the node", o.id)
	if row != nil {
		res, err = ss.runCall(o.ctx, row, msg)
	}
	if err != nil {
		if ss.lost(err) {
			return
		}
		r.Result, r.RetryAfter = batchError(err), retryAfter(err)
	} else {
		api.SetAnswer(r, res)
	}
	ss.answerCall(r)
}

// runCall is one call's run on a session: what the guard checks, the
// call's handler, and the forward to the leader (see call).
func (ss *session) runCall(ctx context.Context, row *api.Procedure, msg proto.Message) (proto.Message, error) {
	if err := principalOf(ss.ctx).authorize(row.Name, msg); err != nil {
		return nil, err
	}
	res, err := ss.s.calls[row.Name](ctx, msg)
	if addr, ok := leaderOf(err); ok {
		r, err := ss.s.fwd.call(ctx, addr, row, msg, ss.fwdHdr)
		if err != nil {
			return nil, err
		}
		ss.mu.Lock()
		ss.leader = r.Header().Get(LeaderHeader)
		ss.mu.Unlock()
		return r.Any().(proto.Message), nil
	}
	return res, err
}

// bindCalls finds the unary handler, among impls (by service name), of
// each call the session stream carries.
func bindCalls(impls map[string]any) (map[string]api.Handler, error) {
	calls := map[string]api.Handler{}
	for _, row := range api.Procedures() {
		if row.Session != api.SessionCall {
			continue
		}
		m := reflect.ValueOf(impls[row.Service()]).MethodByName(row.Method())
		if !m.IsValid() {
			return nil, fmt.Errorf("server: no handler of %s for the session stream", row.Name)
		}
		h, ok := row.Bind(m.Interface())
		if !ok {
			return nil, fmt.Errorf("server: the handler of %s has the wrong type for its row", row.Name)
		}
		calls[row.Name] = h
	}
	return calls, nil
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
func (ss *session) startCall(op *pb.SessionOp) {
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
	go ss.call(o, op)
}
