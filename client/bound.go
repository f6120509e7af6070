package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// The client's own bound (Config.Timeout): a call whose context has no
// deadline gives up after Timeout, plus the wait it asked the server for
// (Wait, PollWait), with an error matching leasehold.ErrUnavailable. A
// stream (Watch, Observe, Assignments, Snapshot) is bounded so until it
// opens; an open one is not cut.

// boundCause ends a context bounded by the client: the call ends with
// ErrUnavailable, not with a context error the caller did not cause.
type boundCause struct {
	wait, timeout time.Duration
}

func (b *boundCause) Error() string { return fmt.Sprintf("client timeout %v passed", b.wait+b.timeout) }

// bound gives ctx the client's deadline: wait plus Timeout, unless ctx has
// a deadline of its own or Timeout is negative (no bound).
func (c *Client) bound(ctx context.Context, wait time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || c.cfg.Timeout < 0 {
		return ctx, func() {}
	}
	return c.boundAnyway(ctx, wait)
}

// boundAnyway is bound even for a ctx with a later deadline of its own
// (FailOpen answers within its bound whatever ctx allows).
func (c *Client) boundAnyway(ctx context.Context, wait time.Duration) (context.Context, context.CancelFunc) {
	if c.cfg.Timeout < 0 {
		return ctx, func() {}
	}
	b := &boundCause{wait: wait, timeout: c.cfg.Timeout}
	return context.WithTimeoutCause(ctx, wait+c.cfg.Timeout, b)
}

// ended is the error of a call whose ctx ended, given the last failure it
// retried (nil if none): ErrUnavailable naming the endpoints and the bound
// if the client's bound ended it, else the context's error (with last).
func (c *Client) ended(ctx context.Context, last error) error {
	var b *boundCause
	if !errors.As(context.Cause(ctx), &b) {
		if last != nil {
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), last)
		}
		return ctx.Err()
	}
	urls := make([]string, len(c.nodes))
	for i := range c.nodes {
		urls[i] = c.nodes[i].url
	}
	within := fmt.Sprintf("%v (Config.Timeout)", b.timeout)
	if b.wait > 0 {
		within = fmt.Sprintf("%v (the wait %v plus Config.Timeout %v)", b.wait+b.timeout, b.wait, b.timeout)
	}
	msg := fmt.Sprintf("leasehold unavailable: no answer from %s within %s; give the context a deadline to wait longer",
		strings.Join(urls, ", "), within)
	if last != nil {
		msg += "; last error: " + last.Error()
	}
	return &leasehold.Error{Code: leasehold.CodeUnavailable, Message: msg}
}

// unanswered is the failure of one attempt that got no answer in d.
func unanswered(url string, d time.Duration) error {
	return leasehold.Errorf(leasehold.CodeUnavailable, "%s did not answer within %v", url, d)
}

// opening ends a stream (cancel) that gives no first answer within limit
// (0: no limit) or before octx ends (the bound on opening). The function
// it returns, called at the first answer, lifts both.
func opening(octx context.Context, url string, limit time.Duration, cancel context.CancelCauseFunc) (opened func()) {
	stop := context.AfterFunc(octx, func() { cancel(context.Cause(octx)) })
	stopTimer := func() bool { return false }
	if limit > 0 {
		stopTimer = time.AfterFunc(limit, func() { cancel(unanswered(url, limit)) }).Stop
	}
	return func() { stop(); stopTimer() }
}

// streamErr is err, the end of a stream whose ctx opening may have
// canceled, or the reason opening gave.
func streamErr(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); ctx.Err() != nil && cause != ctx.Err() {
		return cause
	}
	return err
}
