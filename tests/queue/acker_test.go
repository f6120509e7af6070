package queue_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/queue"
)

// countingTransport counts the requests of each procedure it carries.
type countingTransport struct {
	http.RoundTripper
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.calls[r.URL.Path]++
	c.mu.Unlock()
	return c.RoundTripper.RoundTrip(r)
}

func (c *countingTransport) count(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[path]
}

// Handlers that finish together have their messages acked in batches
// (Queues/AckBatch, one commit each), not one call per message; every
// message is acked once.
func TestConsumeAcksTogetherInABatch(t *testing.T) {
	n := testcluster.StartNode(t, "")
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	ct := &countingTransport{RoundTripper: tr, calls: map[string]int{}}
	c, err := client.New(client.Config{Endpoints: []string{n.URL}, HTTPClient: &http.Client{Transport: ct},
		Logger: testcluster.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx := testutil.Context(t, 20*time.Second)
	if _, err := c.CreateQueue(ctx, "q", client.QueueSettings{}); err != nil {
		t.Fatal(err)
	}
	const msgs = 20
	for i := range msgs {
		send(t, c, "k"+strconv.Itoa(i), "m")
	}
	var started atomic.Int32
	release := make(chan struct{})
	stop := consume(t, c, func(ctx context.Context, m *queue.Message) error {
		if started.Add(1) == msgs {
			close(release) // every handler finishes at once
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, queue.Concurrency(msgs), queue.Consumer("batcher"))
	testutil.Eventually(t, 15*time.Second, "every message acked", func() bool { return depth(t, c).Depth == 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	acks, batches := ct.count("/leasehold.v1.Queues/Ack"), ct.count("/leasehold.v1.Queues/AckBatch")
	if batches == 0 || acks+batches >= msgs {
		t.Fatalf("%d handlers finishing together were acked with %d Ack and %d AckBatch calls; want batches, fewer calls than messages",
			msgs, acks, batches)
	}
	t.Logf("%d messages acked with %d Ack and %d AckBatch calls", msgs, acks, batches)
}
