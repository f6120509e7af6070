package server_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
)

// A Create retried with its request_id answers existed = false, as the
// first did: the queue is the one this very call created. Another Create
// of it (no request_id, or a new one) answers existed = true; the id
// reused for another queue is refused, and so is a malformed id.
func TestQueueCreateRetriedWithItsRequestIDAnswersAsTheFirst(t *testing.T) {
	n := startNode(t)
	c := queuesClient(t, n.URL)
	create := func(req *pb.QueuesCreateRequest) (*pb.QueuesCreateResponse, error) {
		res, err := c.Create(ctxFor(t, callTimeout), connect.NewRequest(req))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}
	for i := range 2 {
		res, err := create(&pb.QueuesCreateRequest{Queue: "jobs", RequestId: "create-1"})
		if err != nil || res.Existed || res.Queue.GetName() != "jobs" {
			t.Fatalf("create attempt %d with request_id create-1: %v %v, want the queue, existed false", i+1, res, err)
		}
	}
	if res, err := create(&pb.QueuesCreateRequest{Queue: "jobs"}); err != nil || !res.Existed {
		t.Fatalf("another create of jobs: %v %v, want existed true", res, err)
	}
	_, err := create(&pb.QueuesCreateRequest{Queue: "mail", RequestId: "create-1"})
	wantCode(t, err, connect.CodeInvalidArgument, "request_id", "different request")
	_, err = create(&pb.QueuesCreateRequest{Queue: "mail", RequestId: strings.Repeat("x", 1000)})
	wantCode(t, err, connect.CodeInvalidArgument, "request_id")
}
