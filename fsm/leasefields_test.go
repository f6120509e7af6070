package fsm

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// A held lease keeps its times as integers: with 100,000 leases held
// (no request IDs, short names) the state costs at most 395 bytes a
// lease (time.Time fields made it about 410), and a lease reads back
// with the times it was given.
func TestHeldLeaseMemory(t *testing.T) {
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	const n = 100_000
	cmds := make([]Command, n)
	for i := range cmds {
		cmds[i] = &Acquire{Resources: []string{fmt.Sprintf("r%06d", i)}, Owner: "o", Operation: "op",
			TTL: 30 * time.Second, SecretHash: secret("s")}
	}
	base := heap()
	s := New(DefaultConfig(), nil)
	s.Apply(1, &Batch{Time: t0, Cmds: cmds})
	per := float64(heap()-base) / n
	runtime.KeepAlive(s)
	runtime.KeepAlive(cmds) // counted before: the leases share their names
	t.Logf("%.0f bytes per held lease", per)
	if per > 395 {
		t.Fatalf("%.0f bytes per held lease, want at most 395", per)
	}
	s.Apply(2, &Batch{Time: t0 + int64(time.Second), Cmds: []Command{&Renew{LeaseID: 1, SecretHash: secret("s"), Progress: "half"}}})
	l, ok := s.Lease(1)
	if !ok || !l.AcquiredAt.Equal(time.Unix(0, t0)) || !l.RenewedAt.Equal(time.Unix(0, t0+int64(time.Second))) ||
		!l.ProgressAt.Equal(l.RenewedAt) || l.AcquiredAt.Location() != time.UTC {
		t.Fatalf("lease 1 reads %+v, want acquired at t0 and renewed with progress a second later, in UTC", l)
	}
}
