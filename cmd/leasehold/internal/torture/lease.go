package torture

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/history"
)

// leaseTask takes a lease on one of a few shared resources, makes fenced
// writes through leasehold's fenced KV (each to a key of its own), maybe
// renews, and releases. One time in stallOneIn it stalls past its lease,
// as a paused or partitioned holder would, and then writes with its old
// token: the fence must refuse that write once the resource went to
// someone else.
func (w *worker) leaseTask(ctx context.Context) {
	res := w.run.name("lease/r%d", w.rng.IntN(leaseResources))
	var l *client.Lease
	acq, err := w.call(primLease, "acquire", res, nil, func() (map[string]any, error) {
		c, cancel := opCtx(ctx)
		defer cancel()
		var err error
		l, err = w.c.Acquire(c, res, client.TTL(leaseTTL), client.ManualRenew(), client.Owner(fmt.Sprintf("torture-w%d", w.id)))
		if err != nil {
			return nil, err
		}
		return map[string]any{"lease": l.ID(), "token": l.Token()}, nil
	})
	if err != nil {
		sleep(ctx, time.Duration(20+w.rng.IntN(80))*time.Millisecond)
		return
	}
	h := history.Hold{Op: acq.ID, Owner: fmt.Sprintf("w%d", w.id), Resource: res, Token: l.Token(), Lease: l.ID(),
		Sent: acq.Invoke, Ack: acq.Return, LastOK: acq.Invoke, TTL: safeTTL(leaseTTL)}
	w.rec.grant(history.Grant{Op: acq.ID, Resource: res, Lease: l.ID(), Token: l.Token(), At: acq.Return})
	deadline := w.rec.at(l.Deadline())
	lost := false
	for n := range 1 + w.rng.IntN(3) {
		if w.rec.now() >= deadline {
			break // a careful holder writes only within its lease
		}
		if n > 0 && w.rng.IntN(2) == 0 {
			op, err := w.call(primLease, "renew", res, map[string]any{"lease": l.ID()}, func() (map[string]any, error) {
				c, cancel := opCtx(ctx)
				defer cancel()
				return nil, l.Renew(c)
			})
			switch op.Result {
			case resultOK:
				h.LastOK, deadline = op.Invoke, w.rec.at(l.Deadline())
			case resultRefused:
				lost = !errors.Is(err, leasehold.ErrLimit)
			}
			if lost {
				break
			}
		}
		w.fencedPut(ctx, "put_fenced", res, l.Token(), false)
	}
	if !lost && w.rng.IntN(stallOneIn) == 0 {
		// Stall past the lease, then write with the old token.
		sleep(context.WithoutCancel(ctx), time.Duration(deadline-w.rec.now())+leaseTTL/2+time.Duration(w.rng.IntN(1000))*time.Millisecond)
		w.fencedPut(ctx, "put_stale", res, l.Token(), w.run.cfg.UnsafeSkipFence)
	}
	h.End = min(w.rec.now(), deadline)
	rel, _ := w.call(primLease, "release", res, map[string]any{"lease": l.ID()}, func() (map[string]any, error) {
		c, cancel := opCtx(ctx)
		defer cancel()
		return nil, l.Release(c)
	})
	h.EndOp = rel.ID
	h.Released = rel.Result == resultOK
	h.ReleaseUnknown = rel.Result == resultUnknown
	w.rec.hold(primLease, h)
}

// fencedPut writes a fresh key fenced by (res, token) and records an
// acknowledged write. With unfenced, the write goes without its fence (a
// resource that does not check tokens, to show the check catches it) but
// is recorded as fenced.
func (w *worker) fencedPut(ctx context.Context, name, res string, token uint64, unfenced bool) {
	key := w.run.name("fenced/w%d-%d", w.id, w.seq())
	value := []byte(fmt.Sprintf("%s by w%d with %s token %d", name, w.id, res, token))
	var version uint64
	opts := []client.WriteOption{client.Fence(res, token)}
	if unfenced {
		opts = nil
	}
	op, err := w.call(primLease, name, key, map[string]any{"resource": res, "token": token}, func() (map[string]any, error) {
		c, cancel := opCtx(ctx)
		defer cancel()
		var err error
		version, err = w.c.Put(c, key, value, opts...)
		return map[string]any{"version": version}, err
	})
	if err == nil {
		w.rec.wrote(history.Write{Op: op.ID, Key: key, Value: value, Version: version, Resource: res, Token: token, Sent: op.Invoke})
	}
}
