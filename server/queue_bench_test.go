package server_test

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
)

// BenchmarkQueueCycle is one 200-byte message through Send, Receive and
// Ack (three commits) on one node, over the Connect protocol, from 16
// goroutines at once, each sending on a key of its own and receiving
// whatever is ready. It reports messages per second.
//
//	go test -run '^$' -bench BenchmarkQueueCycle -benchtime 2000x ./server
func BenchmarkQueueCycle(b *testing.B) {
	n := startNode(b)
	c := queuesClient(b, n.URL)
	createQueue(b, c, "bench", nil)
	body := make([]byte, 200)
	var worker atomic.Int64
	b.SetParallelism(8) // 16 goroutines on 2 CPUs
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(p *testing.PB) {
		key := "k" + strconv.FormatInt(worker.Add(1), 10)
		consumer := "c" + key
		for p.Next() {
			ctx := ctxFor(b, callTimeout)
			if _, err := c.Send(ctx, connect.NewRequest(&pb.QueuesSendRequest{Queue: "bench", Key: key, Body: body})); err != nil {
				b.Error(err)
				return
			}
			var d *pb.QueueDelivery
			for d == nil {
				res, err := c.Receive(ctx, connect.NewRequest(&pb.QueuesReceiveRequest{Queue: "bench", Wait: dur(time.Second), Consumer: consumer}))
				if err != nil {
					b.Error(err)
					return
				}
				if len(res.Msg.Deliveries) > 0 {
					d = res.Msg.Deliveries[0]
				}
			}
			if err := ack(c, ctx, d); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}
