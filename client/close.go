package client

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// ErrClosed: the call was made after Client.Close.
var ErrClosed = errors.New("client: closed")

// Close stops the background work the client owns, and then every call
// returns an error matching ErrClosed. It is safe to call more than once
// and from several goroutines at once; it always returns nil.
//
// Leases are the caller's to release: release them before Close to free
// their resources at once. Close stops the renewal of every lease still
// held and ends it at once locally (Done closes, Context is canceled, Err
// matches ErrLeaseLost and ErrClosed), since nothing renews it any more; it
// does not release it, so on the server it expires after its TTL. Close
// also abandons the give-back of acquires whose callers left (those grants
// expire too) and closes the idle connections of the transport New made
// (not those of a Config.HTTPClient). Calls in flight finish as they would
// have.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed.Store(true)
		held := make([]*Lease, 0, len(c.held))
		for l := range c.held {
			held = append(held, l)
		}
		c.mu.Unlock()
		c.stopGiveBacks()
		for _, l := range held {
			l.stopRenewal()
			l.end(fmt.Errorf("%w: %w: renewal stopped; the server lets the lease expire after its TTL", ErrLeaseLost, ErrClosed))
		}
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
	})
	return nil
}

// track registers a lease whose renewal loop is about to start, so that
// Close can stop it. It reports false if the client is closed.
func (c *Client) track(l *Lease) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return false
	}
	c.held[l] = struct{}{}
	return true
}

// untrack forgets a lease whose renewal loop has ended.
func (c *Client) untrack(l *Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.held, l)
}

// startGiveBack counts a give-back goroutine about to start, so that Close
// can wait for it. It reports false if the client is closed.
func (c *Client) startGiveBack() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
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
