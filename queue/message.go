package queue

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// Message is a delivery being handled. Its methods are safe for
// concurrent use.
type Message struct {
	Queue    string
	Key      string
	Sequence uint64 // the delivery id, with Token
	// Token is the delivery's fencing token: it strictly increases per key
	// across deliveries and redeliveries. Write it with the effect.
	Token    uint64
	Receives int // this delivery included
	Body     []byte
	SentAt   time.Time

	d        leasehold.Delivery
	k        *consumer
	ctx      context.Context
	cancel   context.CancelCauseFunc
	settled  atomic.Bool   // its ack or nack is claimed
	answered chan struct{} // closed once that ack or nack is answered

	mu       sync.Mutex
	deadline time.Time
	timer    *time.Timer // ends ctx at the deadline
	progress bool        // reported since the last extension
	note     string
}

func newMessage(k *consumer, d leasehold.Delivery) *Message {
	m := &Message{Queue: d.Queue, Key: d.Key, Sequence: d.Sequence, Token: d.Token, Receives: d.Receives,
		Body: d.Body, SentAt: d.SentAt, d: d, k: k, deadline: d.Deadline, answered: make(chan struct{})}
	m.ctx, m.cancel = context.WithCancelCause(k.base)
	m.timer = time.AfterFunc(time.Until(d.Deadline), func() { m.cancel(ErrVisibilityLost) })
	return m
}

// progressMax is the longest progress note the server takes.
const progressMax = 1024

// Progress reports that the handler is getting on, with a short note
// shown to operators (up to 1 KiB; longer is cut): the delivery's
// visibility is extended at the next renewal (every third of the
// visibility). Without progress it is not
// extended, and the handler's context ends at the deadline.
func (m *Message) Progress(note string) {
	note = truncate(note, progressMax)
	m.mu.Lock()
	m.progress, m.note = true, note
	m.mu.Unlock()
}

// Deadline is the delivery's local safe deadline, moved on by each
// extension.
func (m *Message) Deadline() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.deadline
}

// keepVisible extends the delivery every third of its visibility while
// the handler reports progress, until stop is called.
func (m *Message) keepVisible() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		vis := m.k.o.visibility
		t := time.NewTicker(max(vis/3, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-m.ctx.Done():
				return
			case <-t.C:
			}
			m.mu.Lock()
			progress, note := m.progress, m.note
			m.progress = false
			m.mu.Unlock()
			if !progress {
				continue // no progress, no extension: the deadline stands
			}
			ctx, cancel := context.WithTimeout(m.ctx, min(settleTimeout, vis/2))
			deadline, err := m.k.c.Extend(ctx, m.d, vis, note)
			cancel()
			switch {
			case err == nil:
				m.mu.Lock()
				m.deadline = deadline
				m.timer.Reset(time.Until(deadline))
				m.mu.Unlock()
			case errors.Is(err, leasehold.ErrStaleToken), errors.Is(err, leasehold.ErrNotFound):
				m.k.o.log.Warn("queue delivery lost", "queue", m.Queue, "key", m.Key, "sequence", m.Sequence, "err", err)
				m.cancel(ErrVisibilityLost)
				return
			default:
				// Try again at the next tick; the deadline stands meanwhile.
				m.k.o.log.Warn("queue extension failed", "queue", m.Queue, "key", m.Key, "sequence", m.Sequence, "err", err)
				m.mu.Lock()
				m.progress = true
				m.mu.Unlock()
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait(); m.timer.Stop() }) }
}
