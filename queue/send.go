package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// Send sends ms (1 to 100, in one commit) to the queue name, waiting out
// backpressure: a refusal because the queue is full is retried after the
// server's retry-after hint (with up to a fifth more, so refused producers
// do not come back all at once), until the send is accepted or ctx ends.
// Nothing of a refused send was enqueued, so the retry cannot duplicate
// it; give the messages dedup ids to make a retry after a lost reply safe
// across calls too. It returns the last refusal when ctx ends.
func Send(ctx context.Context, c *client.Client, name string, ms ...leasehold.Message) ([]leasehold.Sent, error) {
	for {
		sent, err := c.SendBatch(ctx, name, ms)
		var ra *client.RetryAfterError
		if !errors.As(err, &ra) {
			return sent, err
		}
		wait := ra.RetryAfter + rand.N(ra.RetryAfter/5+1)
		if !sleep(ctx, wait) {
			return nil, fmt.Errorf("%w (last refusal: %w)", ctx.Err(), err)
		}
	}
}
