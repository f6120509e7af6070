package torture

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/history"
)

// queueTask sends a message to one of a few keys of the run's queue, or
// receives and acknowledges (one delivery in ten is left to time out and
// come back). history.QueueOrder checks per-key order, one ack per
// message, and that every acknowledged send is delivered.
func (w *worker) queueTask(ctx context.Context) {
	if w.rng.IntN(2) == 0 {
		w.send(ctx)
		return
	}
	w.receive(ctx, time.Duration(100+w.rng.IntN(200))*time.Millisecond, w.rng.IntN(10) != 0)
}

func (w *worker) send(ctx context.Context) {
	q := w.run.queue
	key := fmt.Sprintf("k%d", w.rng.IntN(queueKeys))
	body := fmt.Sprintf("w%d-%d", w.id, w.seq())
	var sent leasehold.Sent
	op, err := w.call(primQueue, "send", q+"/"+key, map[string]any{"body": body}, func() (map[string]any, error) {
		c, cancel := opCtx(ctx)
		defer cancel()
		var err error
		// The body as dedup id: a retried send enqueues nothing more.
		sent, err = w.c.Send(c, q, leasehold.Message{Key: key, Body: []byte(body), DedupID: body})
		return map[string]any{"sequence": sent.Sequence}, err
	})
	s := history.QueueSend{Op: op.ID, Key: key, Body: body}
	if err == nil {
		s.Seq = sent.Sequence
	}
	w.rec.sent(s)
}

// receive takes up to four deliveries, waiting up to wait, and acks them
// if ack. It reports how many it got.
func (w *worker) receive(ctx context.Context, wait time.Duration, ack bool) int {
	q := w.run.queue
	var ds []leasehold.Delivery
	op, err := w.call(primQueue, "receive", q, nil, func() (map[string]any, error) {
		c, cancel := opCtx(ctx)
		defer cancel()
		var err error
		ds, err = w.c.Receive(c, q, 4, client.PollWait(wait), client.ConsumerName(fmt.Sprintf("w%d", w.id)),
			client.VisibilityTimeout(queueVisibility))
		var got []map[string]any
		for _, d := range ds {
			got = append(got, map[string]any{"key": d.Key, "sequence": d.Sequence, "token": d.Token, "body": string(d.Body)})
		}
		return map[string]any{"deliveries": got}, err
	})
	if err != nil {
		return 0
	}
	for _, d := range ds {
		w.rec.delivered(history.QueueDelivery{Op: op.ID, Key: d.Key, Body: string(d.Body), Seq: d.Sequence, Token: d.Token, Invoke: op.Invoke})
	}
	if !ack {
		return len(ds)
	}
	for _, d := range ds {
		a, err := w.call(primQueue, "ack", q+"/"+d.Key, map[string]any{"sequence": d.Sequence, "token": d.Token},
			func() (map[string]any, error) {
				c, cancel := opCtx(ctx)
				defer cancel()
				return nil, w.c.Ack(c, d)
			})
		if err == nil {
			w.rec.acked(history.QueueAck{Op: a.ID, Key: d.Key, Seq: d.Sequence, Token: d.Token, Return: a.Return})
		}
	}
	return len(ds)
}
