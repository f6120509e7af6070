package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	hist "github.com/leasehold/leasehold/internal/history"
)

// history records what the service acknowledged during a scenario: the
// grants it answered, the writes it confirmed, and the operations it
// accepted that it must have refused. The counters are computed from it
// and from the state read back afterwards, never from what the test
// expected to happen.
type history struct {
	mu           sync.Mutex
	phase        int
	grants       []hist.Grant
	writes       []hist.Write
	unauthorized []string
}

func (h *history) granted(resource string, leaseID, token uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.grants = append(h.grants, hist.Grant{Phase: h.phase, Resource: resource, Lease: leaseID, Token: token})
}

func (h *history) wrote(w hist.Write) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.writes = append(h.writes, w)
}

// accepted records an operation the service must have refused.
func (h *history) accepted(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.unauthorized = append(h.unauthorized, fmt.Sprintf(format, args...))
}

// nextPhase marks a fault boundary with no operation in flight: every
// grant after it must carry a token above every token answered before.
func (h *history) nextPhase() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.phase++
}

// maxToken is the largest token granted on resource so far (0 if none).
func (h *history) maxToken(resource string) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var m uint64
	for _, g := range h.grants {
		if g.Resource == resource {
			m = max(m, g.Token)
		}
	}
	return m
}

// resources lists every resource granted so far.
func (h *history) resources() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]bool{}
	var rs []string
	for _, g := range h.grants {
		if !seen[g.Resource] {
			seen[g.Resource] = true
			rs = append(rs, g.Resource)
		}
	}
	return rs
}

// counts are a scenario's four safety counters.
type counts struct {
	acked        int  // acknowledged writes (context for lost)
	readBack     bool // every acknowledged write was read back: lost is known
	lost         int
	tokensReused int
	stale        int
	unauthorized int
	examples     []string // a few of the violations, for the failure message
}

func (c *counts) example(format string, args ...any) {
	if len(c.examples) < 6 {
		c.examples = append(c.examples, fmt.Sprintf(format, args...))
	}
}

// count computes the counters: c reads every acknowledged write back (if
// c is nil, lost is not counted: only what the history shows by itself).
func (h *history) count(ctx context.Context, c *client.Client) (counts, error) {
	h.mu.Lock()
	grants := append([]hist.Grant(nil), h.grants...)
	writes := append([]hist.Write(nil), h.writes...)
	unauthorized := append([]string(nil), h.unauthorized...)
	h.mu.Unlock()

	n := counts{acked: len(writes), unauthorized: len(unauthorized)}
	for _, u := range unauthorized {
		n.example("unauthorized: %s", u)
	}
	reused := hist.TokensReused(grants)
	stale := hist.StaleWrites(grants, writes)
	n.tokensReused, n.stale = len(reused), len(stale)
	for _, v := range append(reused, stale...) {
		n.example("%s", v)
	}
	if c == nil {
		return n, nil
	}
	for _, w := range writes {
		var v []byte
		err := retryUnavailable(ctx, func(ctx context.Context) (err error) {
			v, _, err = c.GetKey(ctx, w.Key)
			return err
		})
		switch {
		case errors.Is(err, leasehold.ErrNotFound):
			n.lost++
			n.example("lost: %s (acknowledged at version %d) is gone", w.Key, w.Version)
		case err != nil:
			return n, fmt.Errorf("read back %s: %w", w.Key, err)
		case !bytes.Equal(v, w.Value):
			n.lost++
			n.example("lost: %s (acknowledged at version %d) reads back other bytes", w.Key, w.Version)
		}
	}
	n.readBack = true
	return n, nil
}

// retryUnavailable retries f while the service is unavailable (a leader
// change, a node coming back), for up to 30s.
func retryUnavailable(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		err := f(ctx)
		if err == nil || !errors.Is(err, leasehold.ErrUnavailable) || ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
