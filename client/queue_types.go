package client

import (
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// The keyed queues' types, in plain Go: callers never need the generated
// API. Wall-clock times are the leader's, for display only.

// Dead-letter modes: what a key does once its head message used up its
// receives and moved to the dead letters.
const (
	// DeadLetterSkip (the default) moves on to the key's next message.
	DeadLetterSkip = "skip"
	// DeadLetterBlock holds the key until its dead letter is redriven or
	// purged.
	DeadLetterBlock = "block"
)

// QueueSettings are a queue's limits; zero fields take the server's
// defaults (visibility 30s, 5 receives, 4 days' retention, 100000
// messages, 64 MiB, 1000 in flight per consumer, a 5-minute dedup window,
// DeadLetterSkip).
type QueueSettings struct {
	Visibility             time.Duration
	MaxReceives            int
	Retention              time.Duration
	MaxDepth               int
	MaxBytes               int
	MaxInFlightPerConsumer int
	DedupWindow            time.Duration
	DeadLetter             string // DeadLetterSkip or DeadLetterBlock
}

// QueueInfo is what an inspection of a queue shows.
type QueueInfo struct {
	Name      string
	Settings  QueueSettings
	CreatedAt time.Time
	Depth     int // messages queued, in flight and dead
	InFlight  int
	Dead      int
	Bytes     int
	Keys      int           // keys with a message queued, in flight or blocked
	OldestAge time.Duration // age of the oldest message not dead; 0 if none
	// InFlightKeys are the keys with a message in flight, oldest message
	// first (Queue only; a bounded list).
	InFlightKeys []InFlightKey
}

// InFlightKey is a key whose head message is out with a consumer.
type InFlightKey struct {
	Key      string
	Sequence uint64
	Token    uint64
	Receives int
	Consumer string
	SentAt   time.Time
	// Visibility is what the delivery got (or its last extension).
	Visibility time.Duration
}

// Messages, what a send answers, deliveries and dead letters are the
// vocabulary's: leasehold.Message, leasehold.Sent, leasehold.Delivery
// (whose Deadline the client sets: the local safe deadline) and
// leasehold.DeadLetter.

// RetryAfterError is a refusal for backpressure: the queue (or the
// cluster's budget for all queues) is full. Nothing of the refused send
// was enqueued; send again after RetryAfter. It matches
// leasehold.ErrLimit with errors.Is; find it with
//
//	var ra *client.RetryAfterError
//	if errors.As(err, &ra) { time.Sleep(ra.RetryAfter) }
type RetryAfterError struct {
	RetryAfter time.Duration
	Err        error // the server's refusal, naming the limit
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("%v (retry after %v)", e.Err, e.RetryAfter)
}

func (e *RetryAfterError) Unwrap() error { return e.Err }

// minRetryAfter is the hint assumed when the server gives none.
const minRetryAfter = 100 * time.Millisecond

// backpressure wraps a resource_exhausted error in a RetryAfterError,
// with the server's hint (or minRetryAfter); other errors pass through.
func backpressure(err error, hint time.Duration) error {
	var ra *RetryAfterError
	if err == nil || !errors.Is(err, leasehold.ErrLimit) || errors.As(err, &ra) {
		return err // a session stream's refusal comes with its hint
	}
	return &RetryAfterError{RetryAfter: max(hint, minRetryAfter), Err: err}
}
