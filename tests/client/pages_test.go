package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// TestLeasesIteratesEveryPage: Leases yields every held lease under the
// prefix exactly once across pages (more leases than one page holds),
// none outside it; a loop that breaks early ends the iteration; a read
// that fails is yielded as the last pair's error.
func TestLeasesIteratesEveryPage(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c, other := nodeClient(t, n), nodeClient(t, n)
	const count = leasehold.MaxListLimit + 5 // two pages
	want := map[uint64]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := g; i < count; i += 16 {
				l := mustAcquire(t, c, []string{fmt.Sprintf("pages/in/%04d", i)}, client.TTL(time.Minute), client.ManualRenew())
				mu.Lock()
				want[l.ID()] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	mustAcquire(t, c, []string{"pages/out"}, client.TTL(time.Minute), client.ManualRenew())

	ctx := ctxFor(t, callTimeout)
	seen := map[uint64]bool{}
	for l, err := range other.Leases(ctx, "pages/in/") {
		if err != nil {
			t.Fatalf("Leases after %d leases: %v", len(seen), err)
		}
		if !want[l.ID] || seen[l.ID] {
			t.Fatalf("Leases yielded lease %d on %v: not one of ours, or twice", l.ID, l.Resources)
		}
		if l.TTL != time.Minute || !l.ExpiresKnown {
			t.Fatalf("lease %d: TTL %v, expiry known %v", l.ID, l.TTL, l.ExpiresKnown)
		}
		seen[l.ID] = true
	}
	if len(seen) != count {
		t.Fatalf("Leases yielded %d leases, want %d", len(seen), count)
	}

	taken := 0
	for _, err := range other.Leases(ctx, "pages/in/") {
		if err != nil {
			t.Fatal(err)
		}
		if taken++; taken == 3 {
			break
		}
	}
	if taken != 3 {
		t.Fatalf("a loop that broke after 3 leases ran %d times", taken)
	}

	gone, cancel := context.WithCancel(ctx)
	cancel()
	var errs, items int
	for _, err := range other.Leases(gone, "pages/in/") {
		if err != nil {
			errs++
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Leases under a canceled context: %v, want context.Canceled", err)
			}
			continue
		}
		items++
	}
	if errs != 1 || items != 0 {
		t.Fatalf("Leases under a canceled context: %d leases and %d errors, want 0 and 1", items, errs)
	}
}
