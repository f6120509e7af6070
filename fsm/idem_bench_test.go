package fsm

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkIdemMemory reports the heap each completed idempotency key
// takes with a 200-byte result, at 1 million keys (36-byte keys like
// "pay/<uuid>", as an HTTP API would use).
//
//	go test -run '^$' -bench BenchmarkIdemMemory -benchtime 1x ./fsm
func BenchmarkIdemMemory(b *testing.B) {
	for b.Loop() {
		heap := func() uint64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		base := heap()
		s := New(DefaultConfig(), nil)
		const n = 1_000_000
		result := make([]byte, 200)
		ix := uint64(0)
		for i := 0; i < n; i += 1000 {
			ix++
			begins := make([]Command, 0, 1000)
			for k := range 1000 {
				begins = append(begins, &IdemBegin{Key: fmt.Sprintf("pay/%032x", i+k), Fingerprint: secret(fmt.Sprint(i + k)),
					Owner: "api", TTL: 30 * time.Second, SecretHash: secret("bench")})
			}
			rs := s.Apply(ix, &Batch{Time: t0 + int64(ix), Cmds: begins})
			ix++
			completes := make([]Command, 0, 1000)
			for k, r := range rs {
				completes = append(completes, &IdemComplete{Key: begins[k].(*IdemBegin).Key, LeaseID: r.Idem().Token,
					SecretHash: secret("bench"), Result: append([]byte(nil), result...)})
			}
			for _, r := range s.Apply(ix, &Batch{Time: t0 + int64(ix), Cmds: completes}) {
				if r.Err != nil {
					b.Fatal(r.Err)
				}
			}
		}
		keys, bytes := s.IdemStats()
		if keys != n || bytes != n*200 {
			b.Fatalf("%d keys, %d bytes", keys, bytes)
		}
		b.ReportMetric(float64(heap()-base)/n, "B/key")
		runtime.KeepAlive(s)
	}
}
