package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
)

var (
	// ErrLeaseLost: the lease ended before its holder released it (expired,
	// renewals failed until the local deadline, or the server no longer
	// knows it). Work done after that was done without the lease.
	ErrLeaseLost = errors.New("lease lost")
	// ErrReleased: the holder released the lease.
	ErrReleased = errors.New("lease released")
	// ErrNoProgress: the holder reported no progress within the progress
	// timeout, so renewal stopped and the lease lapsed.
	ErrNoProgress = errors.New("no progress reported: renewal stopped")
)

// Lease is a granted lease. Its methods are safe for concurrent use.
type Lease struct {
	c         *Client
	id        uint64
	secret    string
	resources []string
	slot      string // the semaphore slot held ("" for a lock)
	opts      acquireOptions

	mu           sync.Mutex
	token        uint64
	releaseDone  bool      // Release got a definitive answer; later calls return nil
	deadline     time.Time // local safe deadline (invariant 3)
	nextRenew    time.Time
	lastProgress time.Time
	note         string
	renewing     bool
	degraded     bool
	err          error
	done         chan struct{}
	stop         chan struct{}
	loopDone     chan struct{}
	stopOnce     sync.Once
	stopCtx      context.Context // canceled by Release: ends a renewal in flight
	stopCancel   context.CancelFunc
}

// Acquire takes resource. See AcquireMany.
func (c *Client) Acquire(ctx context.Context, resource string, opts ...Option) (*Lease, error) {
	return c.AcquireMany(ctx, []string{resource}, opts...)
}

// AcquireMany takes every resource at once, or none. With Wait it blocks
// until granted, the wait bound passes (leasehold.ErrWaitTimeout) or ctx
// ends (the place in the queue is given up). Unless ManualRenew is given,
// the lease renews itself in the background while the holder reports
// progress, until Release.
func (c *Client) AcquireMany(ctx context.Context, resources []string, opts ...Option) (*Lease, error) {
	o := options(opts)
	secret := randomHex(leasehold.SecretBytes)
	req := &pb.AcquireRequest{
		Resources: resources, Ttl: durationpb.New(o.ttl), Owner: o.owner, Operation: o.operation,
		Metadata: o.metadata, Secret: secret, RequestId: randomHex(16),
	}
	if o.limit < 0 || o.limit > leasehold.MaxSemaphoreLimit {
		return nil, leasehold.Errorf(leasehold.CodeInvalid, "semaphore limit %d is outside 1 to %d", o.limit, leasehold.MaxSemaphoreLimit)
	}
	req.Limit = uint32(o.limit)
	if o.wait > 0 {
		req.Wait = durationpb.New(o.wait)
	}
	if o.lockDelay > 0 {
		req.LockDelay = durationpb.New(o.lockDelay)
	}
	if o.maxHold > 0 {
		req.MaxHold = durationpb.New(o.maxHold)
	}
	return c.hold(ctx, resources, o, secret, func(ctx context.Context) (*pb.AcquireResponse, error) {
		return c.acquireCall(ctx, o.wait+c.cfg.RequestTimeout, req)
	})
}

// options applies opts to the defaults.
func options(opts []Option) acquireOptions {
	o := defaultOptions()
	for _, f := range opts {
		f(&o)
	}
	if !o.progressSet {
		o.progressTimeout = o.ttl
	}
	return o
}

// hold sends a request for a lease with send (an acquire, or anything
// answered as one, like a campaign) and keeps what it grants as a Lease
// renewed in the background: the clock starts before the send, a long wait
// is followed by a renewal, and the lease is tracked until it ends.
func (c *Client) hold(ctx context.Context, resources []string, o acquireOptions, secret string,
	send func(context.Context) (*pb.AcquireResponse, error)) (*Lease, error) {
	// Bounded by the wait plus Config.Timeout; FailOpen answers by then
	// even if ctx allows longer.
	bound := c.bound
	if o.failOpen {
		bound = c.boundAnyway
	}
	ctx, stop := bound(ctx, o.wait)
	defer stop()
	ctx, stopAtClose := c.untilClose(ctx)
	defer stopAtClose()
	// The clock starts before the first send: the grant cannot be earlier.
	sent := c.now()
	resp, err := send(ctx)
	if err != nil && errors.Is(context.Cause(ctx), ErrClosed) {
		return nil, fmt.Errorf("%w: Close ended the wait: %w", ErrClosed, err)
	}
	if err != nil {
		if o.failOpen && errors.Is(err, leasehold.ErrUnavailable) && !errors.Is(err, context.Canceled) {
			return c.degradedLease(resources, o, err), nil
		}
		c.metrics.Acquisition(leasehold.CodeOf(err).String())
		return nil, err
	}
	c.metrics.Acquisition("granted")
	slot := ""
	if resp.Lease.GetLimit() > 0 && len(resp.Lease.GetResources()) == 1 {
		// A semaphore's lease holds its slot, not the name asked for.
		resources = resp.Lease.GetResources()
		slot = resources[0]
	}
	l := &Lease{
		c: c, id: resp.Lease.GetId(), secret: secret, resources: resources, slot: slot, opts: o,
		// Progress counts from the grant: time spent waiting is not idleness.
		token: resp.Lease.GetToken(), lastProgress: c.now(), renewing: o.autoRenew,
		done: make(chan struct{}), stop: make(chan struct{}), loopDone: make(chan struct{}),
	}
	l.stopCtx, l.stopCancel = context.WithCancel(context.Background())
	expires := resp.ExpiresIn.AsDuration()
	l.deadline = c.safeExpiry(sent, expires)
	l.nextRenew = sent.Add(expires / 3)
	// After a long wait the deadline counted from the send is near or past:
	// renew at once to count from a fresh send instead.
	if l.deadline.Sub(c.now()) < expires/2 {
		if err := l.renew(ctx, false); err != nil {
			l.end(fmt.Errorf("%w: renewing right after a long wait failed: %w", ErrLeaseLost, err))
			// Give the grant back so waiters need not sit out its TTL.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.RequestTimeout)
			defer cancel()
			c.ReleaseByID(rctx, l.id, l.secret)
			return nil, err
		}
	}
	if !c.track(l) {
		// Close began while the acquire was out: nothing would renew the
		// lease, and nobody else knows it, so give it back.
		close(l.loopDone) // no loop to stop
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.RequestTimeout)
		defer cancel()
		l.releaseWith(rctx, l.giveBackCall)
		return nil, fmt.Errorf("%w: Close began before the grant arrived; it was given back", ErrClosed)
	}
	go l.loop()
	return l, nil
}

func (c *Client) degradedLease(resources []string, o acquireOptions, cause error) *Lease {
	c.metrics.Acquisition("degraded")
	c.metrics.Degraded()
	c.log.Warn("leasehold unreachable: FailOpen hands out a degraded lease with token 0; fenced resources will refuse it",
		"resources", resources, "err", cause)
	l := &Lease{c: c, resources: resources, opts: o, degraded: true,
		done: make(chan struct{}), stop: make(chan struct{}), loopDone: make(chan struct{})}
	l.stopCtx, l.stopCancel = context.WithCancel(context.Background())
	close(l.loopDone)
	return l
}

// ID is the lease's id (0 for a degraded lease).
func (l *Lease) ID() uint64 { return l.id }

// Secret is the proof of holding; keep it out of logs.
func (l *Lease) Secret() string { return l.secret }

// Resources are the resources the lease holds: for a semaphore's lease,
// its one slot.
func (l *Lease) Resources() []string { return l.resources }

// Slot is the semaphore slot the lease holds ("RESOURCE#i", see
// Semaphore), the resource its token fences; "" for a lock's lease.
func (l *Lease) Slot() string { return l.slot }

// Token is the fencing token to present to the protected resource. It is 0
// for a degraded lease, which no fence accepts over a real token.
func (l *Lease) Token() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.degraded {
		return 0
	}
	return l.token
}

// Degraded reports whether the lease was handed out (or kept) under
// FailOpen without the store's confirmation.
func (l *Lease) Degraded() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.degraded
}

// Deadline is the local safe deadline: the lease certainly holds until then
// on the server, whatever the clocks do within the drift allowance.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Done is closed when the lease ends: lost, lapsed or released. After a
// pause of the process (SIGSTOP, a long GC or swap) it may close a moment
// after the process resumes; Err, and the Err of the lease's Context, see
// the loss at once.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err says why the lease ended, or nil while it holds. It reads the clock
// itself: past the local safe deadline it reports the loss (and ends the
// lease) even if the renewal goroutine has not run since, as after a pause
// of the whole process.
func (l *Lease) Err() error {
	l.lapseIfPast()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// lapseIfPast lapses the lease if its local deadline has passed, whether
// or not the renewal loop has woken up to see it.
func (l *Lease) lapseIfPast() {
	l.mu.Lock()
	// The client's clock and the deadline (counted on it) compare on the
	// monotonic clock, which a wall-clock step does not move.
	past := l.err == nil && !l.degraded && !l.c.now().Before(l.deadline)
	renewing := l.renewing
	l.mu.Unlock()
	if past {
		l.lapse(renewing)
	}
}

// Context returns a context that is canceled, with the lease's Err as its
// cause, as soon as the lease ends (or parent does). Run the protected work
// under it. Its Err reads the clock as Lease.Err does, so a holder that
// checks it before each step sees a loss at its first check after a pause;
// a context derived from it (WithTimeout, ...) learns of the loss only
// when its Done closes, so check this one or the lease itself.
func (l *Lease) Context(parent context.Context) context.Context {
	ctx, cancel := context.WithCancelCause(parent)
	go func() {
		select {
		case <-l.done:
			cancel(l.Err())
		case <-ctx.Done():
		}
	}()
	return &leaseContext{Context: ctx, l: l, cancel: cancel}
}

// leaseContext is a lease's Context: a cancelable context whose Err first
// asks the lease, so that it needs no goroutine to have run to see a loss.
// Done, Value and context.Cause are the inner context's.
type leaseContext struct {
	context.Context
	l      *Lease
	cancel context.CancelCauseFunc
}

func (c *leaseContext) Err() error {
	if err := c.l.Err(); err != nil {
		c.cancel(err)
	}
	return c.Context.Err()
}

// Progress records that the holder is making progress; renewal continues
// only while it does (see ProgressTimeout). note, if not empty, is shown to
// operators with the next renewal (up to 256 bytes).
func (l *Lease) Progress(note string) {
	for len(note) > leasehold.MaxProgressLen {
		_, size := utf8.DecodeLastRuneInString(note)
		note = note[:len(note)-size]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastProgress = l.c.now()
	if note != "" {
		l.note = note
	}
}

// Renew extends the lease now. It never retries past the local deadline.
func (l *Lease) Renew(ctx context.Context) error { return l.renew(ctx, true) }

// renew extends the lease. Unbounded, it may try past the local deadline:
// only before Acquire returns, when nobody works under the lease yet.
func (l *Lease) renew(ctx context.Context, bounded bool) error {
	l.mu.Lock()
	deadline, note := l.deadline, l.note
	l.mu.Unlock()
	if bounded {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, deadline.Sub(l.c.now()))
		defer cancel()
	}
	sent := l.c.now()
	resp, err := l.c.renewCall(ctx, &pb.RenewRequest{LeaseId: l.id, Secret: l.secret, Progress: note, RequestId: randomHex(16)})
	if err != nil {
		l.c.metrics.RenewalFailure()
		return err
	}
	expires := resp.ExpiresIn.AsDuration()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deadline = l.c.safeExpiry(sent, expires)
	l.c.log.Debug("lease renewed", "lease", l.id, "sent", sent, "expires_in", expires, "deadline", l.deadline)
	l.nextRenew = sent.Add(expires / 3)
	if l.note == note {
		l.note = ""
	}
	return nil
}

// definitive reports whether a renewal error means the lease is over.
func definitive(err error) bool {
	return errors.Is(err, leasehold.ErrNotFound) || errors.Is(err, leasehold.ErrNotHolder) ||
		errors.Is(err, leasehold.ErrLimit) || errors.Is(err, leasehold.ErrInvalid)
}

// loop renews the lease in the background and ends it at its local
// deadline if no renewal got through.
func (l *Lease) loop() {
	defer close(l.loopDone)
	defer l.c.untrack(l)
	retry := time.Duration(0)
	for {
		l.mu.Lock()
		deadline, next, renewing := l.deadline, l.nextRenew, l.renewing
		if retry > 0 {
			next = l.c.now().Add(retry)
		}
		if renewing && l.opts.progressTimeout > 0 && l.c.now().Sub(l.lastProgress) > l.opts.progressTimeout {
			l.renewing, renewing = false, false
			l.c.log.Warn("lease holder reported no progress; renewal stops and the lease will lapse",
				slog.Uint64("lease", l.id), slog.Duration("progress_timeout", l.opts.progressTimeout))
		}
		l.mu.Unlock()
		wake := deadline
		if renewing && next.Before(deadline) {
			wake = next
		}
		// l.done: Err saw the deadline pass first.
		if !l.c.sleepUntil(wake, l.stop, l.done) {
			return
		}
		l.lapseIfPast() // a Renew call may have moved the deadline while we slept
		l.mu.Lock()
		over := l.err != nil || l.degraded
		l.mu.Unlock()
		if over {
			return
		}
		if !renewing {
			continue
		}
		err := l.Renew(l.stopCtx)
		if l.stopCtx.Err() != nil {
			return // Release is under way
		}
		switch {
		case err == nil:
			retry = 0
		case definitive(err):
			l.end(fmt.Errorf("%w: %w", ErrLeaseLost, err))
			return
		default:
			// Unreachable or slow: try again soon, but never past the deadline.
			retry = min(max(2*retry, 50*time.Millisecond), time.Second)
			l.c.log.Warn("lease renewal failed; retrying until the local deadline",
				slog.Uint64("lease", l.id), slog.Time("deadline", deadline), slog.Any("err", err))
		}
	}
}

// lapse ends the lease at its local deadline, or degrades it under FailOpen
// when renewals could not reach the store.
func (l *Lease) lapse(wasRenewing bool) {
	if !wasRenewing {
		if !l.opts.autoRenew {
			l.end(fmt.Errorf("%w: not renewed before the local deadline", ErrLeaseLost))
			return
		}
		l.end(fmt.Errorf("%w: %w", ErrLeaseLost, ErrNoProgress))
		return
	}
	if l.opts.failOpen {
		l.mu.Lock()
		already := l.degraded // Err and the loop may both see the deadline pass
		l.degraded = true
		l.mu.Unlock()
		if already {
			return
		}
		l.c.metrics.Degraded()
		l.c.log.Warn("leasehold unreachable past the lease's deadline: FailOpen keeps it as a degraded lease with token 0",
			slog.Uint64("lease", l.id))
		return
	}
	l.end(fmt.Errorf("%w: no renewal succeeded before the local deadline", ErrLeaseLost))
}

// end marks the lease over; the first reason wins.
func (l *Lease) end(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	l.err = err
	close(l.done)
	if !errors.Is(err, ErrReleased) {
		l.c.metrics.LeaseLost()
		l.c.log.Warn("lease ended before release", slog.Uint64("lease", l.id), slog.Any("why", err))
	}
}

// stopRenewal stops the renewal loop (ending a renewal in flight) and
// waits for it to return.
func (l *Lease) stopRenewal() {
	l.stopOnce.Do(func() { close(l.stop); l.stopCancel() })
	<-l.loopDone
}

// Release stops renewal and gives the lease back. If the lease had already
// ended on the server, the error wraps ErrLeaseLost: the work done since
// then ran without the lease, and it is counted. Calling Release again
// returns nil.
func (l *Lease) Release(ctx context.Context) error { return l.releaseWith(ctx, l.releaseCall) }

func (l *Lease) releaseCall(ctx context.Context) error {
	_, err := l.c.releaseCall(ctx, &pb.ReleaseRequest{LeaseId: l.id, Secret: l.secret, RequestId: randomHex(16)})
	return err
}

// giveBackCall is the call that gives the lease back: a group session's
// Leave, else a release.
func (l *Lease) giveBackCall(ctx context.Context) error {
	if l.opts.groupSession {
		return l.leaveCall(ctx)
	}
	return l.releaseCall(ctx)
}

// releaseWith is Release with the call that gives the lease back (a
// release, or a group member's Leave).
func (l *Lease) releaseWith(ctx context.Context, send func(context.Context) error) error {
	l.stopRenewal()
	l.mu.Lock()
	released := l.releaseDone || errors.Is(l.err, ErrReleased)
	degraded := l.degraded && l.id == 0
	l.mu.Unlock()
	if released {
		return nil
	}
	if degraded {
		l.end(ErrReleased)
		return nil
	}
	err := send(ctx)
	if err == nil || errors.Is(err, leasehold.ErrNotFound) {
		l.mu.Lock()
		l.releaseDone = true
		l.mu.Unlock()
	}
	switch {
	case err == nil:
		l.end(ErrReleased)
		return nil
	case errors.Is(err, leasehold.ErrNotFound):
		l.c.metrics.WorkAfterLoss()
		l.end(fmt.Errorf("%w: %w", ErrLeaseLost, err))
		return fmt.Errorf("%w: lease %d had already ended when released; work done after that ran without it: %w",
			ErrLeaseLost, l.id, err)
	}
	// Renewal has stopped, so the lease ends at its deadline either way.
	l.end(fmt.Errorf("%w: the release could not be confirmed: %w", ErrLeaseLost, err))
	return err
}

// WithLock runs fn while holding resource, with a context that ends if the
// lease is lost, and releases afterwards. fn should call l.Progress as it
// works (see ProgressTimeout). The error joins fn's and Release's.
func (c *Client) WithLock(ctx context.Context, resource string, fn func(ctx context.Context, l *Lease) error, opts ...Option) error {
	l, err := c.Acquire(ctx, resource, opts...)
	if err != nil {
		return err
	}
	ferr := fn(l.Context(ctx), l)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.RequestTimeout)
	defer cancel()
	return errors.Join(ferr, l.Release(rctx))
}
