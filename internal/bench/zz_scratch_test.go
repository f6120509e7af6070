package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
)

// Scratch: does canceling a waiting Acquire leak a lease?
func TestScratchCancelLeak(t *testing.T) {
	n := sharedNode(t)
	c, _ := client.New(client.Config{Endpoints: []string{n.URL}})
	leaks := 0
	errs := map[string]int{}
	byDelay := map[string]int{}
	for i := range 200 {
		res := fmt.Sprintf("scratch/%d", i)
		a, err := c.Acquire(t.Context(), res, client.ManualRenew(), client.ProgressTimeout(0))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			l, err := c.Acquire(ctx, res, client.Wait(10*time.Second), client.ManualRenew(), client.ProgressTimeout(0))
			if err == nil {
				l.Release(context.Background())
			}
			done <- err
		}()
		time.Sleep(20 * time.Millisecond)
		go a.Release(context.Background())
		time.Sleep(time.Duration(i%7) * 150 * time.Microsecond)
		cancel()
		err = <-done
		if err != nil {
			errs[errorCode(err)]++
		} else {
			errs["ok"]++
		}
		time.Sleep(100 * time.Millisecond)
		g, _ := c.Get(t.Context(), res)
		if h := g.GetHolder(); h != nil {
			leaks++
			who := "B"
			if h.GetId() == a.ID() {
				who = "A"
			}
			byDelay[fmt.Sprintf("%s d1=%d d2=%d", who, i%20, i%7)]++
		}
	}
	t.Logf("%v", byDelay)
	t.Logf("leaks %d of 200; outcomes %v", leaks, errs)
}
