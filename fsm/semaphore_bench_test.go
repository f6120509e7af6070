package fsm

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkSemaphoreAcquireRelease takes and gives back the last free slot
// of a semaphore whose other slots are held: the worst case of the slot
// scan, which looks at every slot.
//
//	go test -run XXX -bench SemaphoreAcquireRelease ./fsm
func BenchmarkSemaphoreAcquireRelease(b *testing.B) {
	for _, limit := range []int{1, 10, 1000} {
		b.Run(fmt.Sprintf("limit=%d", limit), func(b *testing.B) {
			s := New(DefaultConfig(), nil)
			ix := uint64(0)
			for i := range limit - 1 {
				ix++
				c := semAcq(fmt.Sprintf("h%d", i), "pool", limit)
				if r := s.Apply(ix, &Batch{Time: t0, Cmds: []Command{c}})[0]; r.Lease == nil {
					b.Fatal(r.Err)
				}
			}
			a := semAcq("", "pool", limit) // no request ID: nothing remembered
			a.SecretHash = secret("bench")
			rel := &Release{SecretHash: secret("bench")}
			b.ReportAllocs()
			for b.Loop() {
				ix++
				r := s.Apply(ix, &Batch{Time: t0 + int64(ix)*int64(time.Millisecond), Cmds: []Command{a}})[0]
				if r.Lease == nil {
					b.Fatal(r.Err)
				}
				ix++
				rel.LeaseID = r.Lease.ID
				if r := s.Apply(ix, &Batch{Time: t0, Cmds: []Command{rel}})[0]; r.Err != nil {
					b.Fatal(r.Err)
				}
			}
		})
	}
}
