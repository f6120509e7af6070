package client

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/api/leasehold"
)

// Idempotency keys: Idempotent runs a function at most once to completion
// per key, and answers every later call with the same key and fingerprint
// with the stored result.

var (
	// ErrInProgress: another attempt owns the key (and the wait, if any,
	// ran out). Retry later with the same key.
	ErrInProgress = errors.New("idempotency key in progress elsewhere")
	// ErrFingerprintMismatch: the key was first used for a different
	// request. It matches leasehold.ErrNotHolder too.
	ErrFingerprintMismatch = errors.New("idempotency key used with a different fingerprint")
)

// IdemOption changes how Begin and Idempotent use a key.
type IdemOption func(*idemOptions)

type idemOptions struct {
	ttl, retention, wait time.Duration
	owner                string
}

// AttemptTTL is the attempt lease's TTL (default leasehold.DefaultTTL);
// Idempotent renews it while the function runs.
func AttemptTTL(d time.Duration) IdemOption { return func(o *idemOptions) { o.ttl = d } }

// Retention is how long the result is kept (default: the server's, 24h).
func Retention(d time.Duration) IdemOption { return func(o *idemOptions) { o.retention = d } }

// WaitFor waits up to d for another attempt on the key to complete or
// lapse before answering ErrInProgress.
func WaitFor(d time.Duration) IdemOption { return func(o *idemOptions) { o.wait = d } }

// IdemOwner names the caller in inspection output.
func IdemOwner(owner string) IdemOption { return func(o *idemOptions) { o.owner = owner } }

func idemOf(e *endpoint) leaseholdv1connect.IdempotencyClient { return e.idem }

// Attempt is an attempt this caller owns on a key.
type Attempt struct {
	c      *Client
	key    string
	id     uint64
	token  uint64
	secret string
	ttl    time.Duration
}

// Token is the attempt's fencing token: write it with the effect (pgfence,
// httpfence) so a stale attempt's effect is refused.
func (a *Attempt) Token() uint64 { return a.token }

// Begin starts an attempt on key. It returns the attempt, or the stored
// result of a completed one (attempt nil), or an error matching
// ErrInProgress or ErrFingerprintMismatch.
func (c *Client) Begin(ctx context.Context, key string, fingerprint []byte, opts ...IdemOption) (*Attempt, []byte, error) {
	o := idemOptions{ttl: leasehold.DefaultTTL}
	for _, f := range opts {
		f(&o)
	}
	// The secret is made here, so a retried Begin (after a lost reply) is
	// recognised as the same attempt.
	secret := randomHex(leasehold.SecretBytes)
	req := &pb.IdempotencyBeginRequest{Key: key, Fingerprint: fingerprint, AttemptTtl: durationpb.New(o.ttl),
		Owner: o.owner, Secret: secret}
	if o.retention > 0 {
		req.Retention = durationpb.New(o.retention)
	}
	perTry := c.cfg.RequestTimeout
	if o.wait > 0 {
		req.Wait = durationpb.New(o.wait)
		perTry += o.wait
	}
	ctx, stop := c.bound(ctx, o.wait)
	defer stop()
	r, err := call(ctx, c, perTry, idemOf, leaseholdv1connect.IdempotencyClient.Begin, req)
	if errors.Is(err, leasehold.ErrNotHolder) {
		return nil, nil, fmt.Errorf("%w: %w", ErrFingerprintMismatch, err)
	}
	if err != nil {
		return nil, nil, err
	}
	switch r.State {
	case pb.IdemState_IDEM_STATE_STARTED:
		return &Attempt{c: c, key: key, id: r.Attempt, token: r.Token, secret: secret, ttl: o.ttl}, nil, nil
	case pb.IdemState_IDEM_STATE_COMPLETED:
		return nil, r.Result, nil
	}
	return nil, nil, fmt.Errorf("%w: key %q is owned by attempt %d", ErrInProgress, key, r.OwnerToken)
}

// Complete stores result as the key's answer. A stale attempt (its lease
// lapsed) gets an error matching leasehold.ErrStaleToken.
func (a *Attempt) Complete(ctx context.Context, result []byte) error {
	_, err := call(ctx, a.c, a.c.cfg.RequestTimeout, idemOf, leaseholdv1connect.IdempotencyClient.Complete,
		&pb.IdempotencyCompleteRequest{Key: a.key, Attempt: a.id, Secret: a.secret, Result: result})
	return err
}

// Abandon frees the key for a retry at once.
func (a *Attempt) Abandon(ctx context.Context) error {
	_, err := call(ctx, a.c, a.c.cfg.RequestTimeout, idemOf, leaseholdv1connect.IdempotencyClient.Abandon,
		&pb.IdempotencyAbandonRequest{Key: a.key, Attempt: a.id, Secret: a.secret, RequestId: randomHex(16)})
	return err
}

// Renew extends the attempt by its TTL, with a progress note.
func (a *Attempt) Renew(ctx context.Context, progress string) error {
	_, err := call(ctx, a.c, a.c.cfg.RequestTimeout, leasesOf, leaseholdv1connect.LeasesClient.Renew,
		&pb.RenewRequest{LeaseId: a.id, Secret: a.secret, Progress: progress, RequestId: randomHex(16)})
	return err
}

// Idempotent runs fn once per key: it begins an attempt, runs fn with the
// attempt's fencing token (renewing the attempt meanwhile; fn's context
// ends if the attempt is lost), then completes with fn's result, or
// abandons if fn fails so a retry can run it again. A key already
// completed returns its stored result without running fn. A failure that
// must not be retried should be returned as a result, not an error.
func Idempotent(ctx context.Context, c *Client, key string, fingerprint []byte,
	fn func(ctx context.Context, token uint64) ([]byte, error), opts ...IdemOption) ([]byte, error) {
	a, stored, err := c.Begin(ctx, key, fingerprint, opts...)
	if err != nil || a == nil {
		return stored, err
	}
	runCtx, stop := a.Keep(ctx)
	result, err := fn(runCtx, a.token)
	stop()
	if err != nil {
		if aerr := a.Abandon(context.WithoutCancel(ctx)); aerr != nil {
			c.log.Warn("could not abandon an idempotency attempt; it lapses after its TTL", "key", key, "err", aerr)
		}
		return nil, err
	}
	if cause := context.Cause(runCtx); cause != nil && !errors.Is(cause, context.Canceled) {
		return nil, cause // the attempt was lost while fn ran
	}
	if err := a.Complete(context.WithoutCancel(ctx), result); err != nil {
		return nil, err
	}
	return result, nil
}

// Keep renews the attempt in the background until stop is called, and
// returns a context that ends, with the reason as its cause, if the
// attempt is lost meanwhile (stop ends it too, with cause Canceled).
func (a *Attempt) Keep(ctx context.Context) (context.Context, func()) {
	runCtx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go a.keepAlive(runCtx, cancel, done)
	var once sync.Once
	return runCtx, func() { once.Do(func() { close(done); cancel(nil) }) }
}

// keepAlive renews the attempt every third of its TTL until done; if a
// renewal fails for good it ends fn's context with the reason.
func (a *Attempt) keepAlive(ctx context.Context, cancel context.CancelCauseFunc, done <-chan struct{}) {
	t := time.NewTicker(max(a.ttl/3, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			rctx, rcancel := context.WithTimeout(ctx, a.ttl/2)
			err := a.Renew(rctx, "")
			rcancel()
			if err != nil && ctx.Err() == nil {
				cancel(fmt.Errorf("idempotency attempt %d on %q lost: %w", a.id, a.key, err))
				return
			}
		}
	}
}

// FingerprintOf is a fingerprint of parts (a method, a path, a body...).
func FingerprintOf(parts ...[]byte) []byte {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write(p)
	}
	return h.Sum(nil)
}

// IdemInfo is what a read shows of an idempotency key. Result is set only
// for callers allowed to see it (a worker token for the key's prefix).
type IdemInfo struct {
	Key         string
	State       string // "in_progress" or "completed"
	Token       uint64 // the attempt's fencing token
	Owner       string
	StartedAt   time.Time // leader's wall clock, display only
	CompletedAt time.Time
	Retention   time.Duration
	ResultSize  int
	Result      []byte
}

// IdemGet reads one key; an unused key is an error matching
// leasehold.ErrNotFound.
func (c *Client) IdemGet(ctx context.Context, key string) (IdemInfo, error) {
	r, err := call(ctx, c, c.cfg.RequestTimeout, idemOf, leaseholdv1connect.IdempotencyClient.Get, &pb.IdempotencyGetRequest{Key: key})
	if err != nil {
		return IdemInfo{}, err
	}
	return idemInfo(r.Record), nil
}

// IdemList lists up to limit keys (0: the server's default) with prefix,
// after the key after, in key order; results are never included.
func (c *Client) IdemList(ctx context.Context, prefix, after string, limit int) ([]IdemInfo, error) {
	r, err := call(ctx, c, c.cfg.RequestTimeout, idemOf, leaseholdv1connect.IdempotencyClient.List,
		&pb.IdempotencyListRequest{Prefix: prefix, After: after, Limit: uint32(limit)})
	if err != nil {
		return nil, err
	}
	out := make([]IdemInfo, len(r.Records))
	for i, rec := range r.Records {
		out[i] = idemInfo(rec)
	}
	return out, nil
}

func idemInfo(r *pb.IdemRecord) IdemInfo {
	state := "in_progress"
	if r.State == pb.IdemState_IDEM_STATE_COMPLETED {
		state = "completed"
	}
	return IdemInfo{Key: r.Key, State: state, Token: r.Token, Owner: r.Owner,
		StartedAt: stamp(r.StartedAt), CompletedAt: stamp(r.CompletedAt), Retention: r.Retention.AsDuration(),
		ResultSize: int(r.ResultSize), Result: r.Result}
}
