package bench

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// TestQueueMemoryPerMessage measures what a queued 200-byte message costs
// a whole node (the state machine's message, key and indexes, plus what
// raft and the service keep), by the live heap of an embedded node before
// and after 20000 of them on 1000 keys; it fails past 2 KiB a message.
//
//	go test -run TestQueueMemoryPerMessage -v -count=1 ./cmd/leasehold/internal/bench
func TestQueueMemoryPerMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement; skipped with -short")
	}
	const msgs, keys, body = 20000, 1000, 200
	e, err := StartEmbedded(t.Context(), EmbeddedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	c, err := client.New(client.Config{Endpoints: []string{e.URL}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if _, err := c.CreateQueue(ctx, "mem", client.QueueSettings{}); err != nil {
		t.Fatal(err)
	}
	// One warm-up batch, so connections and buffers are made before the
	// first reading.
	batch := func(from int) []leasehold.Message {
		ms := make([]leasehold.Message, 100)
		for i := range ms {
			ms[i] = leasehold.Message{Key: fmt.Sprintf("key-%d", (from+i)%keys), Body: make([]byte, body)}
		}
		return ms
	}
	if _, err := c.SendBatch(ctx, "mem", batch(0)); err != nil {
		t.Fatal(err)
	}
	before := liveHeap()
	for i := 100; i < msgs+100; i += 100 {
		if _, err := c.SendBatch(ctx, "mem", batch(i)); err != nil {
			t.Fatal(err)
		}
	}
	after := liveHeap()
	q, err := c.Queue(ctx, "mem", 0)
	if err != nil {
		t.Fatal(err)
	}
	if q.Depth != msgs+100 {
		t.Fatalf("depth %d, want %d", q.Depth, msgs+100)
	}
	per := float64(after-before) / msgs
	t.Logf("%d queued %d-byte messages on %d keys: the live heap grew %.1f MiB, %.0f bytes a message", msgs, body, keys,
		float64(after-before)/(1<<20), per)
	if per > 2048 {
		t.Fatalf("%.0f bytes a queued %d-byte message, over 2 KiB", per, body)
	}
}

// liveHeap is the heap in use after two collections (the second frees
// what finalizers of the first released).
func liveHeap() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
