package server_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
)

// The retry-after hint of a refused send follows how fast the queue
// drains: a queue whose consumer acked 20 messages in the last seconds
// hints a short wait for room for one more, one whose consumer acked one
// hints a long one; the Retry-After header is the hint rounded up.
func TestQueueRetryAfterFollowsTheDrainRate(t *testing.T) {
	n := startNode(t)
	c := queuesClient(t, n.URL)
	hint := func(queue string, acks int) (time.Duration, string) {
		t.Helper()
		createQueue(t, c, queue, &pb.QueueSettings{MaxDepth: 20})
		for i := range 20 {
			sendMsg(t, c, queue, fmt.Sprint("k", i), "m")
		}
		ds := receive(t, c, &pb.QueuesReceiveRequest{Queue: queue, Max: uint32(acks)})
		for _, d := range ds {
			if err := ack(c, ctxFor(t, callTimeout), d); err != nil {
				t.Fatal(err)
			}
		}
		for i := range acks { // full again
			sendMsg(t, c, queue, fmt.Sprint("j", i), "m")
		}
		_, err := c.Send(ctxFor(t, callTimeout), connect.NewRequest(&pb.QueuesSendRequest{Queue: queue, Key: "x", Body: []byte("m")}))
		wantCode(t, err, connect.CodeResourceExhausted, "max_depth 20")
		return retryAfter(t, err)
	}
	fast, fastHeader := hint("fast", 20)
	slow, slowHeader := hint("slow", 1)
	if fast > time.Second || slow < 5*time.Second || slow <= fast {
		t.Fatalf("retry-after: %v for a queue that acked 20, %v for one that acked 1; want the slow one's longer (≥ 5s), the fast one's ≤ 1s", fast, slow)
	}
	if fastHeader != "1" || slowHeader != fmt.Sprint(int((slow+time.Second-1)/time.Second)) {
		t.Fatalf("Retry-After headers %q and %q for hints %v and %v: want them rounded up to whole seconds", fastHeader, slowHeader, fast, slow)
	}
}

// retryAfter reads a refused send's QueueRetryAfter detail and header.
func retryAfter(t *testing.T, err error) (time.Duration, string) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("%v is not a Connect error", err)
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if h, ok := v.(*pb.QueueRetryAfter); ok {
				return h.RetryAfter.AsDuration(), ce.Meta().Get("Retry-After")
			}
		}
	}
	t.Fatalf("no QueueRetryAfter detail in %v", err)
	return 0, ""
}
