package queue

import (
	"log/slog"
	"time"
)

// Option adjusts Consume.
type Option func(*options)

type options struct {
	concurrency  int
	visibility   time.Duration
	pollWait     time.Duration
	consumer     string
	backoffBase  time.Duration
	backoffMax   time.Duration
	drainTimeout time.Duration
	log          *slog.Logger
}

func defaults() options {
	return options{concurrency: 1, visibility: 30 * time.Second, pollWait: 10 * time.Second,
		backoffBase: time.Second, backoffMax: time.Minute, drainTimeout: 10 * time.Second,
		log: slog.New(slog.DiscardHandler)}
}

// Concurrency runs up to n keys' messages at once (default 1). Each key
// still has at most one message in flight: the server hands out no more.
func Concurrency(n int) Option { return func(o *options) { o.concurrency = n } }

// Visibility is each delivery's visibility timeout (default 30s): how
// long the handler has before the message goes to another consumer,
// unless it reports progress.
func Visibility(d time.Duration) Option { return func(o *options) { o.visibility = d } }

// PollWait is how long one receive waits for a message when the queue has
// none ready (default 10s, at most 20s).
func PollWait(d time.Duration) Option { return func(o *options) { o.pollWait = d } }

// Consumer names this consumer to the server, which caps the messages in
// flight per consumer and shows the name in inspection output.
func Consumer(name string) Option { return func(o *options) { o.consumer = name } }

// Backoff sets the delay of a failed message's next delivery: base
// doubled for each earlier receive, at most max (default 1s and 1m).
func Backoff(base, max time.Duration) Option {
	return func(o *options) { o.backoffBase, o.backoffMax = base, max }
}

// DrainTimeout bounds the drain once Consume's context ends (default
// 10s): handlers still running then have their context canceled and their
// messages are nacked for another consumer.
func DrainTimeout(d time.Duration) Option { return func(o *options) { o.drainTimeout = d } }

// Logger receives failed acks, nacks, extensions and receives (default:
// none).
func Logger(l *slog.Logger) Option { return func(o *options) { o.log = l } }
