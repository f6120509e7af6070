package torture

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/history"
)

// idemTask begins an attempt on one of a few idempotency keys (new keys
// every idemKeyEvery), works briefly and completes it; one time in
// stallOneIn it stalls past the attempt's TTL first. history.IdemOnce
// checks one completion per key and that every stored answer is the
// completed result; Exclusion checks that attempts never overlap.
func (w *worker) idemTask(ctx context.Context) {
	key := w.run.name("idem/%d/k%d", w.rec.now()/int64(idemKeyEvery), w.rng.IntN(idemKeys))
	var a *client.Attempt
	var stored []byte
	op, err := w.call(primIdem, "begin", key, nil, func() (map[string]any, error) {
		c, cancel := opCtx(ctx)
		defer cancel()
		var err error
		a, stored, err = w.c.Begin(c, key, []byte("torture"), client.AttemptTTL(leaseTTL), client.Retention(idemRetention),
			client.IdemOwner(fmt.Sprintf("torture-w%d", w.id)))
		if err != nil {
			return nil, err
		}
		if a == nil {
			return map[string]any{"result": string(stored)}, nil
		}
		return map[string]any{"attempt": a.Token()}, nil
	})
	switch {
	case err != nil:
		sleep(ctx, time.Duration(20+w.rng.IntN(80))*time.Millisecond)
		return
	case a == nil:
		w.rec.answered(history.IdemAnswer{Op: op.ID, Key: key, Result: string(stored)})
		return
	}
	h := history.Hold{Op: op.ID, Owner: fmt.Sprintf("w%d", w.id), Resource: key, Token: a.Token(), Sent: op.Invoke, Ack: op.Return}
	deadline := safeEnd(op.Invoke, leaseTTL)
	work := time.Duration(20+w.rng.IntN(200)) * time.Millisecond
	if w.rng.IntN(stallOneIn) == 0 {
		work = leaseTTL + time.Duration(w.rng.IntN(1000))*time.Millisecond
	}
	sleep(context.WithoutCancel(ctx), work)
	h.End = min(w.rec.now(), deadline)
	result := fmt.Sprintf("done by w%d attempt %d", w.id, a.Token())
	c, err := w.call(primIdem, "complete", key, map[string]any{"attempt": a.Token(), "result": result}, func() (map[string]any, error) {
		c, cancel := opCtx(ctx)
		defer cancel()
		return nil, a.Complete(c, []byte(result))
	})
	h.EndOp = c.ID
	h.Released, h.ReleaseUnknown = err == nil, c.Result == resultUnknown
	w.rec.hold(primIdem, h)
	if c.Result != resultRefused {
		w.rec.completed(history.IdemComplete{Op: c.ID, Key: key, Token: a.Token(), Result: result, Unknown: c.Result == resultUnknown})
	}
}
