package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"

	"github.com/leasehold/leasehold/internal/testcluster"
)

// TestFailoverTime measures failover time: from the moment the leader is
// killed to the first successful acquire through another node, over
// several kills (the old leader restarts and catches up between them).
// The client tries every 50ms with a fresh call (its own backoff would
// blur the figure), each attempt bounded by 250ms.
//
//	go test -run TestFailoverTime -v -count=1 ./integration
func TestFailoverTime(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement; skipped with -short")
	}
	const runs = 7
	c := testcluster.Start(t, 3)
	var total, kills, elections []time.Duration
	for run := range runs {
		old := c.WaitLeader(10 * time.Second)
		var others []string
		for i := range 3 {
			if i != old {
				others = append(others, c.URL(i))
			}
		}
		cl := newTestClient(t, 250*time.Millisecond, others...)
		// Warm the connections so the figure is not a first dial.
		if l, err := cl.Acquire(ctxFor(t, 10*time.Second), "failover/warm", client.TTL(time.Second), client.ManualRenew()); err == nil {
			l.Release(ctxFor(t, 5*time.Second))
		}

		killed := time.Now()
		c.Kill(old)
		killTook := time.Since(killed)
		elected := make(chan time.Duration, 1)
		go func() {
			deadline := time.Now().Add(15 * time.Second)
			for time.Now().Before(deadline) {
				if i := c.Leader(); i >= 0 && i != old {
					elected <- time.Since(killed)
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
			elected <- -1
		}()
		var served time.Duration
		res := fmt.Sprintf("failover/%d", run)
		for attempt := 0; ; attempt++ {
			if time.Since(killed) > 15*time.Second {
				t.Fatalf("run %d: no acquire succeeded within 15s of killing %s", run, c.ID(old))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
			l, err := cl.Acquire(ctx, res, client.TTL(2*time.Second), client.ManualRenew())
			cancel()
			if err == nil {
				served = time.Since(killed)
				l.Release(ctxFor(t, 5*time.Second))
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		el := <-elected
		total, kills, elections = append(total, served), append(kills, killTook), append(elections, el)
		t.Logf("run %d: killed leader %s (Kill took %v); new leader after %v; first acquire through another node after %v",
			run+1, c.ID(old), killTook.Round(time.Millisecond), el.Round(time.Millisecond), served.Round(time.Millisecond))

		c.Restart(old)
		if err := c.WaitApplied(leaderIndex(t, c), 15*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("failover time (leader killed -> first successful acquire through another node) over %d runs: median %v, max %v, min %v",
		runs, median(total).Round(time.Millisecond), slices.Max(total).Round(time.Millisecond), slices.Min(total).Round(time.Millisecond))
	t.Logf("of which election (leader killed -> new leader has taken over): median %v, max %v; Kill itself: median %v",
		median(elections).Round(time.Millisecond), slices.Max(elections).Round(time.Millisecond), median(kills).Round(time.Millisecond))
}
