package groups

import (
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// Option adjusts Run.
type Option func(*config)

type config struct {
	ttl                    time.Duration
	metadata               map[string]string
	stopMargin             time.Duration
	stopMarginSet          bool
	minBackoff, maxBackoff time.Duration
	log                    *slog.Logger
}

func configOf(opts []Option) config {
	cfg := config{ttl: leasehold.DefaultTTL, minBackoff: 100 * time.Millisecond, maxBackoff: 5 * time.Second,
		log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&cfg)
	}
	if !cfg.stopMarginSet {
		cfg.stopMargin = cfg.ttl / 5
	}
	return cfg
}

// TTL is the member session's time to live (default 15s): a member that
// stops renewing loses its partitions to the others after about this long.
func TTL(d time.Duration) Option { return func(c *config) { c.ttl = d } }

// Metadata is shown with the member to operators and other members.
func Metadata(m map[string]string) Option { return func(c *config) { c.metadata = m } }

// StopMargin is how long before the session's local safe deadline the
// partitions' contexts are canceled when no renewal has moved that
// deadline on (default TTL/5): time for the functions to stop before
// another member may own their partitions.
func StopMargin(d time.Duration) Option {
	return func(c *config) { c.stopMargin, c.stopMarginSet = d, true }
}

// RestartBackoff bounds the wait before a function that returned an error
// is started again on a partition it still owns: min after the first
// failure, doubling up to max (defaults 100ms and 5s).
func RestartBackoff(min, max time.Duration) Option {
	return func(c *config) { c.minBackoff, c.maxBackoff = min, max }
}

// Logger receives what Run does: sessions, partitions started and
// stopped, failures (default: discarded).
func Logger(l *slog.Logger) Option { return func(c *config) { c.log = l } }
