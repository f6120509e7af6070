package integration

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testcluster"
)

// BenchmarkTxn measures transactions through one node, the Go client and
// the JSON-free Connect protocol, from parallel goroutines: each a CAS of
// two keys of its own (so every one runs the then branch).
func BenchmarkTxn(b *testing.B) {
	n := testcluster.StartNode(b, "")
	cl := newTestClient(b, 5*time.Second, n.URL)
	var next atomic.Int64
	var elseRan atomic.Int64
	b.SetParallelism(4) // 4 x GOMAXPROCS writers
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		me := strconv.FormatInt(next.Add(1), 10)
		a, c := "bench/"+me+"/a", "bench/"+me+"/b"
		var va, vc uint64
		for pb.Next() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			res, err := cl.Txn(ctx).If(client.VersionEquals(a, va), client.VersionEquals(c, vc)).
				Then(client.OpPut(a, []byte("x")), client.OpPut(c, []byte("y"))).Commit()
			cancel()
			if err != nil {
				b.Error(err)
				return
			}
			if !res.Succeeded {
				elseRan.Add(1)
			}
			va, vc = res.Index, res.Index
		}
	})
	if e := elseRan.Load(); e != 0 {
		b.Errorf("%d transactions ran the else branch; each writer owns its keys", e)
	}
}
