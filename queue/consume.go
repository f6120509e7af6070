// Package queue consumes a leasehold keyed queue: Consume receives
// messages with long polls, runs a handler on up to n keys at once (one
// message per key at a time, in the key's send order), keeps each
// delivery visible while its handler reports progress, acks on success,
// nacks with backoff on failure, and drains within a bound when its
// context ends.
//
// Each message carries its delivery's fencing token: write it with the
// message's effect (pgfence) and the store refuses a consumer that was
// paused past its visibility, after the message went to another.
package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

var (
	// ErrVisibilityLost ends a handler's context when its delivery's
	// local safe deadline passes (no progress was reported, or an
	// extension failed): the message may be out with another consumer,
	// and only a fenced write is still safe to attempt.
	ErrVisibilityLost = errors.New("queue: the delivery's visibility ran out")
	// ErrDraining ends a handler's context when Consume's drain bound
	// passes; its message is nacked for another consumer.
	ErrDraining = errors.New("queue: the consumer stopped and its drain timeout passed")
)

// Handler processes one message. It returns nil to ack it, or an error to
// nack it (delivered again after a backoff, or dead-lettered after the
// queue's max receives; the error's text is kept as its note). ctx ends
// before the delivery's visibility deadline (cause ErrVisibilityLost)
// unless the handler calls m.Progress, and at the end of a drain (cause
// ErrDraining); a handler that outlives its context has its ack refused
// once the message went to another consumer.
type Handler func(ctx context.Context, m *Message) error

// noteMax bounds the error note a nack carries.
const noteMax = 512

// settleTimeout bounds one ack, nack or extension, which outlive the
// consumer's context during a drain.
const settleTimeout = 10 * time.Second

// Consume runs h on the messages of the queue name until ctx ends, then
// drains: it stops receiving, lets running handlers finish for up to the
// drain timeout, then cancels the rest and nacks their messages. It
// returns nil after a drain that ctx's end began, or the error that
// stopped it (such as a queue that does not exist), after draining too.
func Consume(ctx context.Context, c *client.Client, name string, h Handler, opts ...Option) error {
	o := defaults()
	for _, f := range opts {
		f(&o)
	}
	if o.concurrency < 1 || o.concurrency > 10000 {
		return leasehold.Errorf(leasehold.CodeInvalid, "queue: concurrency %d must be 1 to 10000", o.concurrency)
	}
	if o.drainTimeout <= 0 || o.backoffBase < 0 || o.backoffMax < o.backoffBase {
		return leasehold.Errorf(leasehold.CodeInvalid, "queue: the drain timeout must be positive and the backoff 0 <= base <= max")
	}
	k := &consumer{c: c, name: name, h: h, o: o, slots: make(chan struct{}, o.concurrency),
		base: context.WithoutCancel(ctx), running: map[*Message]struct{}{}, acks: newAcker(c)}
	err := k.receiveLoop(ctx)
	k.drain()
	k.acks.close()
	return err
}

// consumer is one Consume's state.
type consumer struct {
	c     *client.Client
	name  string
	h     Handler
	o     options
	slots chan struct{} // one per running handler
	base  context.Context

	acks    *acker         // handlers that finish together ack in one batch
	wg      sync.WaitGroup // running handlers
	mu      sync.Mutex
	running map[*Message]struct{}
}

// receiveLoop receives for free slots until ctx ends or a receive fails
// for good.
func (k *consumer) receiveLoop(ctx context.Context) error {
	retry := 100 * time.Millisecond
	for {
		select { // wait for one free slot
		case k.slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		n := 1
		for n < min(cap(k.slots), leaseholdMaxBatch) {
			select {
			case k.slots <- struct{}{}:
				n++
				continue
			default:
			}
			break
		}
		ds, err := k.c.Receive(ctx, k.name, n, client.VisibilityTimeout(k.o.visibility),
			client.PollWait(k.o.pollWait), client.ConsumerName(k.o.consumer))
		for range n - len(ds) {
			<-k.slots
		}
		if ctx.Err() != nil {
			// A delivery that raced the end is nacked: nobody will run it.
			for _, d := range ds {
				k.settle(newMessage(k, d), false, "the consumer stopped before running it", 0)
			}
			return nil
		}
		if err != nil {
			if !retryable(err) {
				return fmt.Errorf("queue: receive from %q: %w", k.name, err)
			}
			k.o.log.Warn("queue receive failed; retrying", "queue", k.name, "err", err)
			if !sleep(ctx, retry) {
				return nil
			}
			retry = min(2*retry, 5*time.Second)
			continue
		}
		retry = 100 * time.Millisecond
		for _, d := range ds {
			m := newMessage(k, d)
			k.mu.Lock()
			k.running[m] = struct{}{}
			k.mu.Unlock()
			k.wg.Add(1)
			go k.run(m)
		}
	}
}

// leaseholdMaxBatch is the most messages one receive hands out.
const leaseholdMaxBatch = 100

// retryable: errors a consumer waits out (no leader yet, a full
// in-flight allowance) rather than stop for.
func retryable(err error) bool {
	return errors.Is(err, leasehold.ErrUnavailable) || errors.Is(err, leasehold.ErrLimit)
}

// run handles one message, keeps it visible meanwhile, and settles it.
func (k *consumer) run(m *Message) {
	defer func() {
		k.mu.Lock()
		delete(k.running, m)
		k.mu.Unlock()
		<-k.slots
		k.wg.Done()
	}()
	stop := m.keepVisible()
	err := k.h(m.ctx, m)
	stop()
	if err == nil {
		k.settle(m, true, "", 0)
		return
	}
	k.settle(m, false, err.Error(), k.backoff(m.Receives))
}

// backoff is the delay of a message's next delivery after its receives-th
// failed.
func (k *consumer) backoff(receives int) time.Duration {
	d := k.o.backoffBase
	for i := 1; i < receives && d < k.o.backoffMax; i++ {
		d *= 2
	}
	return min(d, k.o.backoffMax)
}

// settle acks or nacks m, once: a handler that returns after the drain
// nacked its message does nothing more.
func (k *consumer) settle(m *Message, ack bool, note string, delay time.Duration) {
	if !m.settled.CompareAndSwap(false, true) {
		return
	}
	k.settleClaimed(m, nil, ack, note, delay)
}

// settleClaimed settles m, whose settlement the caller claimed, ending
// its handler's context with cause, and marks it answered.
func (k *consumer) settleClaimed(m *Message, cause error, ack bool, note string, delay time.Duration) {
	defer close(m.answered)
	m.cancel(cause)
	ctx, cancel := context.WithTimeout(k.base, settleTimeout)
	defer cancel()
	if ack {
		if err := k.acks.ack(ctx, m.d); err != nil {
			k.o.log.Warn("queue ack refused", "queue", k.name, "key", m.Key, "sequence", m.Sequence, "token", m.Token,
				"code", leasehold.CodeOf(err).String(), "err", err)
		}
		return
	}
	if err := k.c.Nack(ctx, m.d, delay, truncate(note, noteMax)); err != nil {
		k.o.log.Warn("queue nack refused", "queue", k.name, "key", m.Key, "sequence", m.Sequence, "token", m.Token,
			"code", leasehold.CodeOf(err).String(), "err", err)
	}
}

// drain waits for the running handlers up to the drain timeout, then
// cancels and nacks the rest, and waits for the settlements already under
// way, so no message Consume handled is still in flight once it returns.
func (k *consumer) drain() {
	done := make(chan struct{})
	go func() { k.wg.Wait(); close(done) }()
	t := time.NewTimer(k.o.drainTimeout)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	k.mu.Lock()
	left := make([]*Message, 0, len(k.running))
	for m := range k.running {
		left = append(left, m)
	}
	k.mu.Unlock()
	for _, m := range left {
		// Claimed before its context ends: the handler, returning on
		// ErrDraining, must not nack it with its own backoff instead.
		if m.settled.CompareAndSwap(false, true) {
			k.settleClaimed(m, ErrDraining, false, ErrDraining.Error(), 0)
			continue
		}
		<-m.answered // its handler returned and is settling it (settleTimeout bounds it)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// sleep waits d or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
