package client_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
)

// BenchmarkIdemPairs measures Begin+Complete pairs per second on one real
// node (in this process), from 64 goroutines sharing one client and from
// 16 clients with one goroutine each. Every pair uses a fresh key.
//
//	go test -run '^$' -bench BenchmarkIdemPairs -benchtime 5s ./client
func BenchmarkIdemPairs(b *testing.B) {
	n := startNode(b)
	for _, tc := range []struct {
		name             string
		clients, workers int
	}{{"1client-64goroutines", 1, 64}, {"16clients", 16, 1}} {
		b.Run(tc.name, func(b *testing.B) {
			cs := make([]*client.Client, tc.clients)
			for i := range cs {
				cs[i] = nodeClient(b, n).Client
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			ctx := context.Background()
			start := time.Now()
			b.ResetTimer()
			for w := range tc.clients * tc.workers {
				c := cs[w%tc.clients]
				wg.Go(func() {
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						key := fmt.Sprintf("%s/%d", tc.name, i)
						_, err := client.Idempotent(ctx, c, key, []byte("fp"), func(context.Context, uint64) ([]byte, error) {
							return []byte("ok"), nil
						})
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pairs/s")
		})
	}
}
