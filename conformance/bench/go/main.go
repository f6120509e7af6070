// Command go is the Go client's acquire+release benchmark: CALLERS
// goroutines sharing one client take and give back a lease of their own
// for SECONDS, then it prints the pairs per second as JSON.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/client"
)

func main() {
	callers, _ := strconv.Atoi(os.Args[1])
	secs, _ := strconv.ParseFloat(os.Args[2], 64)
	c, err := client.New(client.Config{Endpoints: []string{os.Getenv("LEASEHOLD_ENDPOINT")}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer c.Close()
	ctx := context.Background()
	var pairs, failures atomic.Int64
	end := time.Now().Add(time.Duration(secs * float64(time.Second)))
	start := time.Now()
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			for time.Now().Before(end) {
				l, err := c.Acquire(ctx, fmt.Sprintf("bench/go/%d", i), client.TTL(10*time.Second))
				if err == nil {
					err = l.Release(ctx)
				}
				if err != nil {
					failures.Add(1)
					continue
				}
				pairs.Add(1)
			}
		})
	}
	wg.Wait()
	took := time.Since(start).Seconds()
	json.NewEncoder(os.Stdout).Encode(map[string]any{"pairs": pairs.Load(), "failures": failures.Load(),
		"seconds": took, "per_second": float64(pairs.Load()) / took})
}
