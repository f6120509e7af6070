package client

import (
	"fmt"
	"os"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// Option adjusts one Acquire.
type Option func(*acquireOptions)

type acquireOptions struct {
	ttl             time.Duration
	wait            time.Duration
	owner           string
	operation       string
	metadata        map[string]string
	lockDelay       time.Duration
	maxHold         time.Duration
	failOpen        bool
	progressTimeout time.Duration
	progressSet     bool
	autoRenew       bool
	limit           int
	groupSession    bool // a group member's session: given back by Leave
}

func defaultOptions() acquireOptions {
	return acquireOptions{ttl: leasehold.DefaultTTL, autoRenew: true, owner: defaultOwner}
}

// defaultOwner is read once: neither the host name nor the pid changes.
var defaultOwner = DefaultOwner()

// DefaultOwner is the owner a lease shows unless Owner names another:
// "HOST/PID", as the CLI's --owner default.
func DefaultOwner() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", h, os.Getpid())
}

// TTL sets the lease's time to live (default 15s, 100ms to 1h).
func TTL(d time.Duration) Option { return func(o *acquireOptions) { o.ttl = d } }

// Wait queues for up to d if a resource is held (default 0: fail at once
// with an error matching leasehold.ErrHeld).
func Wait(d time.Duration) Option { return func(o *acquireOptions) { o.wait = d } }

// Owner names the holder for operators (default: DefaultOwner, HOST/PID).
func Owner(s string) Option { return func(o *acquireOptions) { o.owner = s } }

// Operation names what the holder does, for operators.
func Operation(s string) Option { return func(o *acquireOptions) { o.operation = s } }

// Metadata attaches small notes (4 KiB in all) shown to operators.
func Metadata(m map[string]string) Option { return func(o *acquireOptions) { o.metadata = m } }

// LockDelay keeps the resources blocked for d after the lease expires (not
// after a clean release), for resources that cannot check tokens.
func LockDelay(d time.Duration) Option { return func(o *acquireOptions) { o.lockDelay = d } }

// MaxHold ends the lease at age d however often it is renewed.
func MaxHold(d time.Duration) Option { return func(o *acquireOptions) { o.maxHold = d } }

// FailOpen chooses availability over safety when the store is unreachable:
// Acquire returns a degraded lease (token 0, Degraded() true) instead of an
// error — after the wait plus Config.Timeout, even if ctx allows longer —
// and a lease whose renewals cannot reach the store degrades instead
// of ending. Both are logged and counted. Only use it for work that is safe
// to run twice at once.
func FailOpen() Option { return func(o *acquireOptions) { o.failOpen = true } }

// FailClosed is the default: an unreachable store is an error, and a lease
// that cannot be renewed ends at its local deadline.
func FailClosed() Option { return func(o *acquireOptions) { o.failOpen = false } }

// ProgressTimeout sets how long renewal continues without a call to
// Lease.Progress (default: the TTL). A holder that stops reporting progress
// stops renewing, and its lease lapses. d <= 0 renews without requiring
// progress, for holders such as leader elections that have none to report.
func ProgressTimeout(d time.Duration) Option {
	return func(o *acquireOptions) { o.progressTimeout, o.progressSet = d, true }
}

// ManualRenew turns off background renewal: the caller renews with
// Lease.Renew.
func ManualRenew() Option { return func(o *acquireOptions) { o.autoRenew = false } }

// Semaphore makes the acquire one of up to n concurrent holders of its one
// resource (like consul lock -n): the lease holds one of n slots,
// "RESOURCE#1" to "RESOURCE#n" (Lease.Slot), and its token fences that
// slot, so the protected side guards the slot's name. Every holder of a
// name must ask for the same n; a name used as a lock cannot be a
// semaphore (an error matching leasehold.ErrConflict).
func Semaphore(n int) Option { return func(o *acquireOptions) { o.limit = n } }
