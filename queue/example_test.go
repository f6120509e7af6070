package queue_test

import (
	"context"
	"log"
	"os/signal"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/queue"
)

// Consume handles an orders queue with 16 handlers: each order's events
// in send order, each delivery's token written with its effect.
func ExampleConsume() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	c, err := client.New(client.Config{Endpoints: []string{"http://127.0.0.1:7420"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	err = queue.Consume(ctx, c, "orders", func(ctx context.Context, m *queue.Message) error {
		// Apply m.Body for order m.Key in one transaction that checks
		// m.Token with pgfence and skips an event already applied.
		m.Progress("applied")
		return nil
	}, queue.Concurrency(16), queue.Visibility(30*time.Second), queue.DrainTimeout(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
}
