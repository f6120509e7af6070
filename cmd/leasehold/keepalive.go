package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
)

// The CLI's client subtracts these from every expiry the server reports
// (client.Config Drift and DriftRatio, the Go client's defaults), and
// renew works out its safe deadline by them too.
const (
	clientDrift      = 10 * time.Millisecond
	clientDriftRatio = 0.02
)

// safeDeadline is the client's own deadline for a lease the server runs
// for expiresIn more, counted from sent (before the request was sent).
func safeDeadline(sent time.Time, expiresIn time.Duration) time.Time {
	return sent.Add(expiresIn - clientDrift - time.Duration(float64(expiresIn)*clientDriftRatio))
}

// renewOnce renews lease id once and returns what renew prints, the
// lease's new safe deadline, and when to renew it next.
func renewOnce(ctx context.Context, c *client.Client, id uint64, secret, progress string) (cliout.Renewed, time.Time, time.Time, error) {
	sent := time.Now()
	_, expiresIn, err := c.RenewByID(ctx, id, secret, progress)
	if err != nil {
		return cliout.Renewed{}, time.Time{}, time.Time{}, leaseGone(err)
	}
	deadline := safeDeadline(sent, expiresIn)
	r := cliout.Renewed{LeaseID: id, ExpiresIn: cliout.Dur(expiresIn), SafeDeadline: cliout.Time(deadline), Progress: progress}
	return r, deadline, sent.Add(expiresIn / 3), nil
}

// keepAlive renews lease id a third of its TTL after each renewal, as the
// Go client does, printing each one with print, until ctx ends (an
// interrupt: nil, and the lease is left to its TTL) or the lease is lost:
// refused by the node (gone: exit 5), or not renewed before its safe
// deadline while the cluster could not be reached (also 5). progress goes
// with the first renewal only: a note says what was done since the last.
func keepAlive(ctx context.Context, g *globals, c *client.Client, id uint64, secret, progress string,
	print func(cliout.Renewed) error, stderr io.Writer) error {
	// The first renewal has --timeout, as any call: it proves the secret.
	// The next ones have until the safe deadline.
	cctx, cancel := g.ctx(ctx, 0)
	r, deadline, next, err := renewOnce(cctx, c, id, secret, progress)
	cancel()
	if err != nil {
		return err
	}
	if err := print(r); err != nil {
		return err
	}
	at := func(t time.Time) string { return t.Local().Format("15:04:05.000") }
	retry := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "leasehold renew: interrupted; lease %d is no longer renewed and lasts until %s at the latest\n", id, at(deadline))
			return nil
		case <-time.After(time.Until(next)):
		}
		cctx, cancel := context.WithDeadline(ctx, deadline)
		got, gotDeadline, gotNext, err := renewOnce(cctx, c, id, secret, "")
		cancel()
		transient := leasehold.CodeOf(err) == leasehold.CodeUnavailable || errors.Is(err, context.DeadlineExceeded)
		switch {
		case err == nil:
			deadline, next, retry = gotDeadline, gotNext, 0
			if err := print(got); err != nil {
				return err
			}
		case ctx.Err() != nil: // interrupted: the select says so
		case !transient:
			return err // gone, or refused: the node's message says which
		case !time.Now().Before(deadline):
			return goneError{fmt.Errorf("lease %d is lost: no renewal got through before its safe deadline %s (last error: %w)",
				id, at(deadline), err)}
		default: // slow or unreachable: again soon, until the deadline
			retry = min(max(2*retry, 50*time.Millisecond), time.Second)
			next = time.Now().Add(retry)
			fmt.Fprintf(stderr, "leasehold renew: renewing lease %d failed, retrying until %s: %v\n", id, at(deadline), err)
		}
	}
}
