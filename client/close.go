package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// ErrClosed: the call was made after Client.Close.
var ErrClosed = errors.New("client: closed")

// DefaultCloseTimeout is Config.CloseTimeout's default.
const DefaultCloseTimeout = 3 * time.Second

// CloseOption changes what CloseContext does.
type CloseOption func(*closeOptions)

type closeOptions struct{ leaveHeld bool }

// LeaveHeld makes Close leave the leases, slots, leaderships and group
// sessions it holds to expire after their TTL instead of giving them back:
// for a hand-over to a process that knows their ids and secrets
// (RenewByID, ReleaseByID).
func LeaveHeld() CloseOption { return func(o *closeOptions) { o.leaveHeld = true } }

// Close is CloseContext(context.Background()).
func (c *Client) Close() error { return c.CloseContext(context.Background()) }

// CloseContext stops the client. It gives back what the client holds (as
// etcd's Session.Close revokes its lease): every lease and semaphore slot
// is released, every leadership resigned, every group session left, so
// that waiters get them at once; each ends with Err matching ErrReleased.
// Acquires, campaigns and joins still waiting end with ErrClosed and give
// their place up; one granted while Close runs is given back at once.
// Queue deliveries are left to their visibility timeout: the client does
// not track them, a handler may still be at work on one, and a nack would
// count a receive against MaxReceives for a message not yet failed.
//
// Giving back is bounded by Config.CloseTimeout and ctx: what is not given
// back by then (the node is down, say) is left to expire after its TTL,
// ends locally at once (Err matching ErrLeaseLost and ErrClosed), and the
// error returned says how many were left. With LeaveHeld nothing is given
// back: renewal stops and every lease ends locally the same way, and Close
// returns nil.
//
// Then every call returns an error matching ErrClosed, and the idle
// connections of the transport New made (not those of a Config.HTTPClient)
// are closed. It is safe to call more than once and from several
// goroutines at once: the first call does the work, the others wait for it
// and return its result.
func (c *Client) CloseContext(ctx context.Context, opts ...CloseOption) error {
	c.closeOnce.Do(func() {
		var o closeOptions
		for _, f := range opts {
			f(&o)
		}
		c.closeErr = c.shutdown(ctx, o)
	})
	return c.closeErr
}

func (c *Client) shutdown(ctx context.Context, o closeOptions) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CloseTimeout)
	defer cancel()
	c.mu.Lock()
	c.closing = true // track refuses new leases from here on
	held := make([]*Lease, 0, len(c.held))
	for l := range c.held {
		held = append(held, l)
	}
	c.mu.Unlock()
	c.endWaits(ErrClosed) // acquires, campaigns and joins still waiting
	var err error
	if o.leaveHeld {
		for _, l := range held {
			l.stopRenewal()
			l.end(fmt.Errorf("%w: %w: renewal stopped; the server lets the lease expire after its TTL", ErrLeaseLost, ErrClosed))
		}
	} else {
		err = c.giveBackAll(ctx, held)
	}
	c.waitGiveBacks(ctx)
	c.closed.Store(true)
	c.stopGiveBacks()
	c.givingBack.Wait()
	if c.session != nil {
		c.session.stop()
	}
	if c.ownTransport != nil {
		c.ownTransport.CloseIdleConnections()
	}
	if c.ownStream != nil {
		c.ownStream.CloseIdleConnections()
	}
	return err
}

// giveBackAll gives every lease in held back at once (the calls share
// batches), until ctx ends. It says how many were left to expire.
func (c *Client) giveBackAll(ctx context.Context, held []*Lease) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		left  int
		first error
	)
	for _, l := range held {
		wg.Go(func() {
			err := l.releaseWith(ctx, func(ctx context.Context) error {
				err := l.giveBackCall(ctx)
				if err != nil && !errors.Is(err, leasehold.ErrNotFound) {
					return fmt.Errorf("%w: %w", ErrClosed, err) // so Err says Close left it
				}
				return err
			})
			if err != nil && !errors.Is(err, ErrLeaseLost) { // a lease already gone was not left
				mu.Lock()
				left++
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if left > 0 {
		return fmt.Errorf("client: Close gave back %d of %d leases; the other %d are left to expire after their TTL: %w",
			len(held)-left, len(held), left, first)
	}
	return nil
}

// waitGiveBacks lets the give-backs of acquires whose callers left
// finish until ctx ends (none start once Close has begun).
func (c *Client) waitGiveBacks(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		c.givingBack.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// track registers a lease whose renewal loop is about to start, so that
// Close can give it back. It reports false once Close has begun.
func (c *Client) track(l *Lease) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return false
	}
	c.held[l] = struct{}{}
	return true
}

// untilClose is ctx, ended with cause ErrClosed when Close begins: a wait
// for a grant ends then.
func (c *Client) untilClose(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(c.closeBegun, func() { cancel(ErrClosed) })
	return ctx, func() { stop(); cancel(nil) }
}

// untrack forgets a lease whose renewal loop has ended.
func (c *Client) untrack(l *Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.held, l)
}

// startGiveBack counts a give-back goroutine about to start, so that Close
// can wait for it. It reports false once Close has begun (the server
// drops a waiter that left after a short grace; a grant expires).
func (c *Client) startGiveBack() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return false
	}
	c.givingBack.Add(1)
	return true
}

// defaultTransport is the pooled transport New makes when Config.HTTPClient
// is nil; Close closes its idle connections.
func defaultTransport(cfg Config) *http.Transport {
	return &http.Transport{
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		TLSClientConfig:     cfg.TLS,
		ForceAttemptHTTP2:   cfg.TLS != nil,
	}
}

// streamTransport is the transport New makes for the session stream when
// Config.HTTPClient is nil: HTTP/2 over TLS for https endpoints, and over
// plain TCP (h2c, prior knowledge) for http ones, which the unary
// transport reaches with HTTP/1.1.
func streamTransport(cfg Config) *http.Transport {
	var p http.Protocols
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	return &http.Transport{
		Protocols:       &p,
		IdleConnTimeout: 90 * time.Second,
		TLSClientConfig: cfg.TLS,
	}
}
