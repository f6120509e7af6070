package server

import (
	"context"

	"connectrpc.com/connect"

	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/service"
)

// AckBatch acks up to MaxQueueBatch deliveries of one queue in one log
// entry. Each ack is answered on its own, as a lone Ack would be: a stale
// token, another consumer's delivery or a bad sequence fails only itself.
// The queue, the count and the consumer name are the whole request's.
func (h queuesAPI) AckBatch(ctx context.Context, req *connect.Request[pb.QueuesAckBatchRequest]) (*connect.Response[pb.QueuesAckBatchResponse], error) {
	m := req.Msg
	if err := queueName(m.Queue); err != nil {
		return nil, err
	}
	if n := len(m.Acks); n == 0 || n > leasehold.MaxQueueBatch {
		return nil, leasehold.Errorf(leasehold.CodeInvalid, "acks has %d entries; ack 1 to %d deliveries at once", n, leasehold.MaxQueueBatch)
	}
	by, err := settler(caller(ctx), m.Consumer)
	if err != nil {
		return nil, err
	}
	out := &pb.QueuesAckBatchResponse{Results: make([]*pb.QueueAckResult, len(m.Acks))}
	var cmds []*service.QueueAckRequest
	var at []int // the ack each request answers
	for i, a := range m.Acks {
		cmd, err := queueAckRequest(m.Queue, a.Sequence, a.Token, a.RequestId, by)
		if err != nil {
			out.Results[i] = &pb.QueueAckResult{Error: api.ToBatchError(leasehold.Errorf(leasehold.CodeOf(err), "acks[%d]: %v", i, err))}
			continue
		}
		out.Results[i] = &pb.QueueAckResult{}
		cmds, at = append(cmds, cmd), append(at, i)
	}
	if len(cmds) > 0 {
		res, err := h.svc.QueueAckBatch(ctx, cmds)
		if err != nil {
			return nil, err // not the leader (forwarded), or no quorum: nothing was acked
		}
		for j, r := range res {
			if r.Err != nil {
				out.Results[at[j]].Error = api.ToBatchError(r.Err)
				continue
			}
			h.acked(m.Queue, r)
		}
	}
	return connect.NewResponse(out), nil
}
