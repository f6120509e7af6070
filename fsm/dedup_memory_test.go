package fsm

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// A remembered acquire costs the dedup window little beyond its key: a
// grant is kept inline, not as a whole Result (which made a record 176
// bytes), its error by its concrete type (an interface made it 96 bytes,
// not 80: ~141 bytes a grant in all), and is answered as before.
func TestDedupRemembersAGrantCompactly(t *testing.T) {
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	const n = 100_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%032x", i)
	}
	cfg := DefaultConfig()
	base := heap()
	d := newDedup()
	for i, k := range keys {
		d.put(k, KindAcquire, fingerprint{1}, 0, Result{Lease: &leasehold.Lease{ID: uint64(i + 1)}, Remaining: time.Minute}, cfg)
	}
	per := float64(heap()-base) / n
	r, ok := d.lookup(keys[7], "id", KindAcquire, fingerprint{1})
	runtime.KeepAlive(&d)
	if !ok || !r.Dup || r.Lease == nil || r.Lease.ID != 8 || r.Remaining != time.Minute || r.Err != nil {
		t.Fatalf("retry answered %+v %v, want lease 8, a minute, dup", r, ok)
	}
	t.Logf("%.0f bytes per remembered grant, besides its key", per)
	if per > 135 {
		t.Fatalf("%.0f bytes per remembered grant besides its key, want at most 135", per)
	}
}
