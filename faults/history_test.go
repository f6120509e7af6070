package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/client"
)

// history records what the service acknowledged during a scenario: the
// grants it answered, the writes it confirmed, and the operations it
// accepted that it must have refused. The counters are computed from it
// and from the state read back afterwards, never from what the test
// expected to happen.
type history struct {
	mu           sync.Mutex
	phase        int
	seq          int64
	grants       []grant
	writes       []write
	unauthorized []string
}

// grant is one acknowledged lease grant.
type grant struct {
	seq      int64 // order in which the test learned of it
	phase    int
	resource string
	leaseID  uint64
	token    uint64
}

// write is one acknowledged KV put, fenced by (resource, token) if
// resource is set. Every write goes to a key of its own.
type write struct {
	key      string
	value    []byte
	version  uint64
	resource string
	token    uint64
}

func (h *history) granted(resource string, leaseID, token uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	h.grants = append(h.grants, grant{seq: h.seq, phase: h.phase, resource: resource, leaseID: leaseID, token: token})
}

func (h *history) wrote(w write) {
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
		if g.resource == resource {
			m = max(m, g.token)
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
		if !seen[g.resource] {
			seen[g.resource] = true
			rs = append(rs, g.resource)
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
	grants := append([]grant(nil), h.grants...)
	writes := append([]write(nil), h.writes...)
	unauthorized := append([]string(nil), h.unauthorized...)
	h.mu.Unlock()

	n := counts{acked: len(writes), unauthorized: len(unauthorized)}
	for _, u := range unauthorized {
		n.example("unauthorized: %s", u)
	}
	n.tokensReused = tokensReused(grants, &n)
	n.stale = staleWrites(grants, writes, &n)
	if c == nil {
		return n, nil
	}
	for _, w := range writes {
		var v []byte
		err := retryUnavailable(ctx, func(ctx context.Context) (err error) {
			v, _, err = c.GetKey(ctx, w.key)
			return err
		})
		switch {
		case errors.Is(err, leasehold.ErrNotFound):
			n.lost++
			n.example("lost: %s (acknowledged at version %d) is gone", w.key, w.version)
		case err != nil:
			return n, fmt.Errorf("read back %s: %w", w.key, err)
		case !bytes.Equal(v, w.value):
			n.lost++
			n.example("lost: %s (acknowledged at version %d) reads back other bytes", w.key, w.version)
		}
	}
	n.readBack = true
	return n, nil
}

// tokensReused counts grants whose token is not above a token answered
// earlier: the same token for two grants, a token not above an earlier
// grant's on the same resource, or after a fault boundary a token not
// above every token answered before it.
func tokensReused(grants []grant, n *counts) int {
	reused := 0
	for i, g := range grants {
		for _, e := range grants[:i] {
			// Each recorded grant is its own event (the suite acquires one
			// resource per lease and records a grant once), so even the same
			// lease id again is a reissue.
			bad := e.token == g.token ||
				(e.resource == g.resource && e.token > g.token) ||
				(e.phase < g.phase && e.token > g.token)
			if bad {
				reused++
				n.example("token reused: %s got token %d (lease %d) after %s had token %d (lease %d)",
					g.resource, g.token, g.leaseID, e.resource, e.token, e.leaseID)
				break
			}
		}
	}
	return reused
}

// staleWrites counts fenced writes applied after a newer grant on their
// resource: token t, version v (the log index that applied it) and a
// grant of the resource with a token in (t, v) — the write's lease had
// already passed to someone else when it was applied.
func staleWrites(grants []grant, writes []write, n *counts) int {
	stale := 0
	for _, w := range writes {
		if w.resource == "" {
			continue
		}
		for _, g := range grants {
			if g.resource == w.resource && g.token > w.token && g.token < w.version {
				stale++
				n.example("stale write accepted: %s fenced by %s token %d applied at %d, after token %d was granted",
					w.key, w.resource, w.token, w.version, g.token)
				break
			}
		}
	}
	return stale
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
