package fsm

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkQueueMemory reports the heap each queued 200-byte message
// takes, body included, at 200,000 messages: spread over 20,000 keys (10
// a key, as orders or accounts would be) and one key per message. The
// messages go through the log's encoding, as on a node.
//
//	go test -run '^$' -bench BenchmarkQueueMemory -benchtime 1x ./fsm
func BenchmarkQueueMemory(b *testing.B) {
	for _, perKey := range []int{10, 1} {
		b.Run(fmt.Sprintf("per-key=%d", perKey), func(b *testing.B) {
			for b.Loop() {
				heap := func() uint64 {
					runtime.GC()
					var m runtime.MemStats
					runtime.ReadMemStats(&m)
					return m.HeapAlloc
				}
				const n = 200_000
				cfg := DefaultConfig()
				base := heap()
				s := New(cfg, nil)
				s.Apply(1, &Batch{Time: t0, Cmds: []Command{&QueueCreate{Queue: "orders",
					Settings: QueueSettings{MaxDepth: n, MaxBytes: n * 200}}}})
				body := make([]byte, 200)
				ix := uint64(1)
				for i := 0; i < n; i += MaxQueueBatch {
					send := &QueueSend{Queue: "orders", Messages: make([]QueueMessage, MaxQueueBatch)}
					for k := range send.Messages {
						send.Messages[k] = QueueMessage{Key: fmt.Sprintf("order/%08d", (i+k)/perKey), Body: body}
					}
					ix++
					dec, err := DecodeBatch((&Batch{Time: t0 + int64(ix), Cmds: []Command{send}}).Encode(nil))
					if err != nil {
						b.Fatal(err)
					}
					if r := s.Apply(ix, dec)[0]; r.Err != nil {
						b.Fatal(r.Err)
					}
				}
				if info, _ := s.Queue("orders"); info.Depth != n {
					b.Fatalf("depth %d", info.Depth)
				}
				b.ReportMetric(float64(heap()-base)/n, "B/msg")
				runtime.KeepAlive(s)
			}
		})
	}
}

// BenchmarkQueueCycle is one message through Send, Receive and Ack, each
// its own command, on a queue holding 1,000 keys' backlog.
//
//	go test -run '^$' -bench BenchmarkQueueCycle -benchmem ./fsm
func BenchmarkQueueCycle(b *testing.B) {
	s := New(DefaultConfig(), nil)
	ix, now := uint64(1), t0
	s.Apply(ix, &Batch{Time: now, Cmds: []Command{&QueueCreate{Queue: "q"}}})
	body := make([]byte, 200)
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
		ix++
		s.Apply(ix, &Batch{Time: now, Cmds: []Command{&QueueSend{Queue: "q", Messages: []QueueMessage{{Key: keys[i], Body: body}}}}})
	}
	send := &QueueSend{Queue: "q", Messages: make([]QueueMessage, 1)}
	recv := &QueueReceive{Queue: "q", Max: 1, Visibility: time.Minute}
	ack := &QueueAck{Queue: "q"}
	batch := &Batch{Time: now, Cmds: make([]Command, 1)}
	i := 0
	for b.Loop() {
		ix++
		send.Messages[0] = QueueMessage{Key: keys[i%len(keys)], Body: body}
		batch.Cmds[0] = send
		s.Apply(ix, batch)
		ix++
		batch.Cmds[0] = recv
		d := s.Apply(ix, batch)[0].Queue().Deliveries[0]
		ix++
		ack.Seq, ack.Token = d.Sequence, d.Token
		batch.Cmds[0] = ack
		if r := s.Apply(ix, batch)[0]; r.Err != nil {
			b.Fatal(r.Err)
		}
		i++
	}
}
