package main

import (
	"context"
	"errors"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// inLine waits in line with try (an acquire or a campaign) for as long as
// w says, although a node keeps a waiter for leasehold.MaxWait at most
// (1h): try is given a wait of at most that, and called again after each
// wait that ran out, until w is spent (forever: never) or ctx ends. Each
// call has its own --timeout on top of its wait. A waiter that queues
// again goes behind whoever queued meanwhile.
func inLine[T any](ctx context.Context, g *globals, w waitFlag, try func(ctx context.Context, wait time.Duration) (T, error)) (T, error) {
	left := w.d
	for {
		wait := leasehold.MaxWait
		if !w.forever {
			wait = min(left, wait)
			left -= wait
		}
		cctx, cancel := g.ctx(ctx, wait)
		v, err := try(cctx, wait)
		cancel()
		if errors.Is(err, leasehold.ErrWaitTimeout) && ctx.Err() == nil && (w.forever || left > 0) {
			continue
		}
		return v, err
	}
}
