package groups_test

import (
	"context"
	"log"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/groups"
)

// Each worker process runs this with its own member name; every
// partition of "orders" is worked on by exactly one of them at a time.
func ExampleRun() {
	c, err := client.New(client.Config{Endpoints: []string{"http://127.0.0.1:7420"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background() // cancel it to leave the group
	err = groups.Run(ctx, c, "orders", "worker-1", func(ctx context.Context, partition int, epoch uint64) error {
		for ctx.Err() == nil {
			// Consume the partition's work; fence each write with epoch
			// (pgfence.Guard.Check(ctx, tx, resource, epoch)).
			time.Sleep(100 * time.Millisecond)
		}
		return nil // revoked, session at risk, or ctx ended: Run acknowledges
	}, groups.TTL(10*time.Second))
	if err != nil {
		log.Fatal(err) // no such group, a refused name, no permission
	}
}
