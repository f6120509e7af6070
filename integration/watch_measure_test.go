package integration

import (
	"context"
	"fmt"
	"github.com/leasehold/leasehold/internal/testcluster"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
)

// TestMeasureWatchFanout measures the events a second delivered to 100
// watchers (Go clients over HTTP, one node) while 16 clients acquire and
// release as fast as they can. Run it on purpose:
//
//	LEASEHOLD_MEASURE=1 go test -run TestMeasureWatchFanout -v ./internal/testcluster/
func TestMeasureWatchFanout(t *testing.T) {
	if os.Getenv("LEASEHOLD_MEASURE") == "" {
		t.Skip("a measurement: set LEASEHOLD_MEASURE=1")
	}
	const watchers, writers, run = 100, 16, 10 * time.Second
	n := testcluster.StartNode(t, "")
	ctx := ctxFor(t, time.Minute)
	wc := newTestClient(t, 5*time.Second, n.URL)
	var delivered atomic.Int64
	var wg sync.WaitGroup
	wctx, stopWatch := context.WithCancel(ctx)
	for range watchers {
		w := wc.Watch(wctx, []string{"bench/"})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range w.Events() {
				delivered.Add(1)
			}
		}()
	}
	time.Sleep(time.Second) // let every watch open before the clock starts
	var ops atomic.Int64
	load, stopLoad := context.WithTimeout(ctx, run)
	defer stopLoad()
	var lw sync.WaitGroup
	start := time.Now()
	for g := range writers {
		lw.Add(1)
		go func() {
			defer lw.Done()
			c := newTestClient(t, 5*time.Second, n.URL)
			for load.Err() == nil {
				l, err := c.Acquire(load, fmt.Sprintf("bench/%d", g), client.TTL(time.Minute), client.ManualRenew())
				if err != nil {
					continue
				}
				if l.Release(context.WithoutCancel(load)) == nil {
					ops.Add(1)
				}
			}
		}()
	}
	lw.Wait()
	elapsed := time.Since(start)
	before := delivered.Load()
	// Let the watchers drain what was applied, then stop them.
	waitFor(t, 30*time.Second, "watchers catch up", func() (bool, string) {
		d := delivered.Load()
		return d >= 2*ops.Load()*watchers, fmt.Sprint(d)
	})
	stopWatch()
	wg.Wait()
	total := delivered.Load()
	t.Logf("%d writers: %d acquire+release pairs in %v (%.0f/s); %d watchers: %d events delivered (%.0f events/s during the load, %d of them after it)",
		writers, ops.Load(), elapsed.Round(time.Millisecond), float64(ops.Load())/elapsed.Seconds(),
		watchers, total, float64(before)/elapsed.Seconds(), total-before)
}
