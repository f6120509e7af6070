package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// Histogram indexes of the queue workload.
const (
	opSend    = 0
	opReceive = 1
	opAck     = 2
	opE2E     = 3 // from the send of a message to its ack
)

// benchQueue is the queue the workload sends to and receives from.
const benchQueue = "bench/queue"

// queueWorkload: each worker runs a producer, which sends messages (Batch
// at a time) of BodyBytes to random keys among Resources, and a consumer,
// which receives up to Batch at a time and acks them in one AckBatch (a
// lone delivery with Ack). The producers keep
// at most one batch each unacknowledged (backlog), so the send-to-ack
// latency is the pipeline's, not the time spent behind a backlog the
// producers piled up (Little's law would make that any figure at all);
// a refusal for backpressure is waited out for its retry-after hint and
// counted.
type queueWorkload struct {
	r         *runner
	producers []*client.Client
	consumers []*client.Client
	keys      []string
	backlog   int64
	pending   atomic.Int64 // sent, not yet acked
	// run marks this run's messages (their bytes 8-15): a message another
	// run left is acked but not counted.
	run uint64
}

func newQueueWorkload(r *runner) (workload, error) {
	cfg := r.cfg
	w := &queueWorkload{r: r, backlog: int64(cfg.Clients * cfg.Batch), run: rand.Uint64()}
	w.keys = make([]string, cfg.Resources)
	for i := range w.keys {
		w.keys[i] = fmt.Sprintf("key-%d", i)
	}
	// One client per side per worker, as separate processes would, unless
	// shared: then all producers share one client and all consumers
	// another, as the goroutines of two processes would.
	var sharedP, sharedC *client.Client
	for range cfg.Clients {
		p, c := sharedP, sharedC
		if p == nil {
			var err error
			if p, err = newClient(cfg); err != nil {
				return nil, err
			}
			if c, err = newClient(cfg); err != nil {
				return nil, err
			}
		}
		if cfg.Shared {
			sharedP, sharedC = p, c
		}
		w.producers = append(w.producers, p)
		w.consumers = append(w.consumers, c)
	}
	ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
	defer cancel()
	if _, err := w.producers[0].CreateQueue(ctx, benchQueue, client.QueueSettings{}); err != nil {
		return nil, fmt.Errorf("bench: create the queue %s: %w", benchQueue, err)
	}
	return w, nil
}

func (w *queueWorkload) opNames() []string          { return []string{"send", "receive", "ack", "send to ack"} }
func (w *queueWorkload) unit() string               { return "messages" }
func (w *queueWorkload) setupDone() <-chan struct{} { return nil }
func (w *queueWorkload) progress() string           { return "" }

// finish drops what the run left in the queue (up to a batch per
// producer), so that a next run starts from an empty queue.
func (w *queueWorkload) finish(*Report, []*stats) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	w.producers[0].PurgeQueue(ctx, benchQueue, "leasehold bench: the end of a queue run")
}

// worker runs worker i's producer beside its consumer; the producer's
// figures join the worker's stats when both are done.
func (w *queueWorkload) worker(i int, st *stats) {
	pst := newStats(len(w.opNames()))
	var wg sync.WaitGroup
	wg.Go(func() { w.produce(i, pst) })
	w.consume(i, st)
	wg.Wait()
	st.ops[opSend].Merge(&pst.ops[opSend])
	for k, v := range pst.errs {
		st.errs[k] += v
	}
}

func (w *queueWorkload) produce(i int, st *stats) {
	r := w.r
	c := w.producers[i]
	rng := rand.New(rand.NewPCG(r.cfg.Seed, uint64(i)))
	body := make([]byte, max(r.cfg.BodyBytes, 16))
	binary.LittleEndian.PutUint64(body[8:], w.run)
	for !r.stopping() && r.opCtx.Err() == nil {
		if w.pending.Load() >= w.backlog {
			r.sleep(time.Millisecond)
			continue
		}
		ms := make([]leasehold.Message, r.cfg.Batch)
		t0 := time.Now()
		for j := range ms {
			b := append([]byte(nil), body...)
			binary.LittleEndian.PutUint64(b, uint64(t0.UnixNano())) // the send time, for the consumer
			ms[j] = leasehold.Message{Key: w.keys[rng.IntN(len(w.keys))], Body: b}
		}
		var err error
		if len(ms) == 1 {
			_, err = c.Send(r.opCtx, benchQueue, ms[0])
		} else {
			_, err = c.SendBatch(r.opCtx, benchQueue, ms)
		}
		t1 := time.Now()
		var ra *client.RetryAfterError
		switch {
		case errors.As(err, &ra):
			st.fail(r, err)
			r.sleep(ra.RetryAfter)
			continue
		case err != nil:
			st.fail(r, err)
			r.backoff()
			continue
		}
		w.pending.Add(int64(len(ms)))
		if r.measuring() {
			st.ops[opSend].Record(t1.Sub(t0))
		}
	}
}

func (w *queueWorkload) consume(i int, st *stats) {
	r := w.r
	c := w.consumers[i]
	for !r.stopping() && r.opCtx.Err() == nil {
		t0 := time.Now()
		ds, err := c.Receive(r.opCtx, benchQueue, r.cfg.Batch, client.PollWait(time.Second),
			client.VisibilityTimeout(30*time.Second))
		t1 := time.Now()
		if err != nil {
			st.fail(r, err)
			r.backoff()
			continue
		}
		if len(ds) == 0 {
			continue
		}
		if r.measuring() {
			st.ops[opReceive].Record(t1.Sub(t0))
		}
		if len(ds) > 1 {
			// The messages of one receive are done together: one AckBatch.
			actx, cancel := r.releaseCtx()
			a0 := time.Now()
			errs, err := c.AckBatch(actx, ds)
			a1 := time.Now()
			cancel()
			for i, d := range ds {
				if err == nil {
					err = errs[i]
				}
				w.acked(st, d, err, a1.Sub(a0), a1)
			}
			continue
		}
		actx, cancel := r.releaseCtx()
		a0 := time.Now()
		err = c.Ack(actx, ds[0])
		a1 := time.Now()
		cancel()
		w.acked(st, ds[0], err, a1.Sub(a0), a1)
	}
}

// acked records the ack of d, answered err after took, at a1.
func (w *queueWorkload) acked(st *stats, d leasehold.Delivery, err error, took time.Duration, a1 time.Time) {
	r := w.r
	if len(d.Body) < 16 || binary.LittleEndian.Uint64(d.Body[8:]) != w.run {
		return // left by another run: not this run's figures
	}
	w.pending.Add(-1)
	if err != nil {
		st.fail(r, err)
		return
	}
	if r.complete() {
		st.ops[opAck].Record(took)
		sent := time.Unix(0, int64(binary.LittleEndian.Uint64(d.Body)))
		st.ops[opE2E].Record(a1.Sub(sent))
	}
}
