package fsm

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// A snapshot is written into a buffer sized from the one before, and
// writes the dedup window's grants without a lease each, so taking one
// allocates little more than the snapshot itself (growing the buffer by
// appends and a lease per remembered grant made it about four times).
func TestSnapshotAllocatesItsSizeOnce(t *testing.T) {
	s := New(DefaultConfig(), nil)
	for i := 0; i < 50_000; i += 1000 {
		cmds := make([]Command, 0, 1000)
		for k := range 1000 {
			cmds = append(cmds, &Acquire{RequestID: fmt.Sprintf("%032x", i+k), Resources: []string{fmt.Sprintf("res/%07d", i+k)},
				Owner: "worker", Operation: "bench", TTL: 30 * time.Second, SecretHash: secret("s")})
		}
		s.Apply(uint64(i/1000+1), &Batch{Time: t0, Cmds: cmds})
	}
	allocated := func(f func()) uint64 {
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		f()
		runtime.ReadMemStats(&b)
		return b.TotalAlloc - a.TotalAlloc
	}
	first := s.Snapshot()
	var second []byte
	n := allocated(func() { second = s.Snapshot() })
	if string(first) != string(second) {
		t.Fatal("two snapshots of the same state differ")
	}
	ratio := float64(n) / float64(len(second))
	t.Logf("a snapshot of %d bytes allocated %d (%.2fx)", len(second), n, ratio)
	if ratio > 1.5 {
		t.Fatalf("a snapshot of %d bytes allocated %d bytes (%.2fx its size), want at most 1.5x", len(second), n, ratio)
	}
}
