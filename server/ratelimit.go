package server

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/leasehold/leasehold/api/leasehold"
)

// rateKey carries, in a request's context, the client its acquisitions are
// charged to: the token's name, or without auth the caller's IP address
// (the one a forwarding node names: trust.go). The guard sets it on every
// request, so a request is charged on the node it arrives at and again,
// forwarded, on the leader, to the same caller: the leader's bucket holds
// each caller to its rate across the cluster.
type rateKey struct{}

// charge takes n acquisitions that passed validation from the rate of the
// client of ctx's request, or refuses them all with ResourceExhausted.
// Handlers call it after checking a request, so a refused request costs
// its client nothing.
func (s *Server) charge(ctx context.Context, n int) error {
	key, ok := ctx.Value(rateKey{}).(string)
	if !ok || n == 0 {
		return nil
	}
	return s.rate.allow(key, n, time.Now())
}

// rateLimiter is a token bucket per client: rate acquisitions a second
// with a burst of twice that (at least 1). A request never takes more than
// the bucket holds, so it never leaves the client in debt: the longest a
// request can lock its client out is the time to refill the burst. Full
// buckets are dropped, as a new one is the same.
type rateLimiter struct {
	rate    float64
	burst   int
	mu      sync.Mutex
	clients map[string]*rate.Limiter
	swept   time.Time
}

func newRateLimiter(perSecond float64) *rateLimiter {
	if perSecond <= 0 {
		return nil
	}
	return &rateLimiter{rate: perSecond, burst: int(max(1, min(math.MaxInt32, 2*perSecond))),
		clients: map[string]*rate.Limiter{}}
}

// allow takes n acquisitions from key's bucket at now, or refuses all n.
func (r *rateLimiter) allow(key string, n int, now time.Time) error {
	if r == nil {
		return nil
	}
	if n > r.burst {
		return leasehold.Errorf(leasehold.CodeLimit,
			"this request makes %d acquisitions; client %q may make at most %d at once (limit acquire_rate, %g a second): split it",
			n, key, r.burst, r.rate)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Sub(r.swept) > time.Minute {
		for k, l := range r.clients {
			if l.TokensAt(now) >= float64(r.burst) {
				delete(r.clients, k)
			}
		}
		r.swept = now
	}
	l := r.clients[key]
	if l == nil {
		l = rate.NewLimiter(rate.Limit(r.rate), r.burst)
		r.clients[key] = l
	}
	if !l.AllowN(now, n) {
		return leasehold.Errorf(leasehold.CodeLimit,
			"client %q is over %g acquisitions a second (limit acquire_rate); slow down and retry", key, r.rate)
	}
	return nil
}

// validAcquires counts a batch's acquires that passed validation: what
// the batch is charged.
func validAcquires(items []batchItem) int {
	n := 0
	for i := range items {
		if items[i].acquire != nil && items[i].err == nil {
			n++
		}
	}
	return n
}
