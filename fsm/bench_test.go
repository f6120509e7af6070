package fsm

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Benchmarks of the apply loop and of snapshots. They reuse command
// objects and precomputed request IDs, so the allocations reported are
// Apply's own. A request ID comes back only after 1024 entries one second
// apart, long after the 5-minute dedup window has forgotten it.

const benchRing = 1024

func benchIDs(prefix string, n int) [][]string {
	ids := make([][]string, benchRing)
	for i := range ids {
		ids[i] = make([]string, n)
		for k := range n {
			ids[i][k] = fmt.Sprintf("%s-%d-%d", prefix, i, k)
		}
	}
	return ids
}

// BenchmarkApplyAcquireRelease: each op is one log entry holding n
// acquires of distinct resources and the n releases of those leases (their
// ids are known in advance: tokens follow the entry's index).
func BenchmarkApplyAcquireRelease(b *testing.B) {
	for _, n := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			s := New(DefaultConfig(), nil)
			acqIDs, relIDs := benchIDs("a", n), benchIDs("r", n)
			acqs := make([]*Acquire, n)
			rels := make([]*Release, n)
			cmds := make([]Command, 0, 2*n)
			for k := range n {
				acqs[k] = &Acquire{Resources: []string{fmt.Sprintf("jobs/%d", k)}, Owner: "worker-1",
					Operation: "bench", TTL: 15 * time.Second, SecretHash: secret("bench")}
				rels[k] = &Release{SecretHash: secret("bench")}
				cmds = append(cmds, acqs[k])
			}
			for k := range n {
				cmds = append(cmds, rels[k])
			}
			batch := &Batch{Time: t0, Cmds: cmds}
			var ix uint64
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				ix++
				batch.Time += int64(time.Second)
				first := max(ix, s.LastToken()+1)
				for k := range n {
					acqs[k].RequestID = acqIDs[i%benchRing][k]
					rels[k].RequestID = relIDs[i%benchRing][k]
					rels[k].LeaseID = first + uint64(k)
				}
				out := s.Apply(ix, batch)
				if out[2*n-1].Err != nil {
					b.Fatalf("release: %v", out[2*n-1].Err)
				}
			}
			if c := s.Counts(); c.Leases != 0 {
				b.Fatalf("%d leases left over", c.Leases)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/pair")
		})
	}
}

// holdLeases applies acquires until n single-resource leases are held and
// returns their ids.
func holdLeases(tb testing.TB, s *State, n int) []uint64 {
	ids := make([]uint64, 0, n)
	ix := s.LastIndex()
	for len(ids) < n {
		ix++
		cmds := make([]Command, 0, 1000)
		for k := range min(1000, n-len(ids)) {
			cmds = append(cmds, &Acquire{
				Resources: []string{fmt.Sprintf("res/%07d", len(ids)+k)},
				Owner:     fmt.Sprintf("worker-%d", (len(ids)+k)%97), Operation: "bench",
				TTL: 15 * time.Second, SecretHash: secret("bench"),
			})
		}
		for _, r := range s.Apply(ix, &Batch{Time: t0 + int64(ix), Cmds: cmds}) {
			if r.Err != nil {
				tb.Fatalf("setup acquire: %v", r.Err)
			}
			ids = append(ids, r.Lease.ID)
		}
	}
	return ids
}

// BenchmarkApplyRenew: one renew per entry, round-robin over 100k held
// leases, each with a request ID.
func BenchmarkApplyRenew(b *testing.B) {
	s := New(DefaultConfig(), nil)
	ids := holdLeases(b, s, 100_000)
	reqIDs := benchIDs("renew", 1)
	rn := &Renew{SecretHash: secret("bench"), Age: time.Second}
	batch := &Batch{Time: t0 + int64(time.Hour), Cmds: []Command{rn}}
	ix := s.LastIndex()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		ix++
		batch.Time += int64(time.Second)
		rn.LeaseID = ids[i%len(ids)]
		rn.RequestID = reqIDs[i%benchRing][0]
		if r := s.Apply(ix, batch)[0]; r.Err != nil || r.Dup {
			b.Fatalf("renew: %s %v", summarize(r), r.Err)
		}
	}
}

var bench100k struct {
	once sync.Once
	s    *State
	snap []byte
}

func state100k(b *testing.B) (*State, []byte) {
	bench100k.once.Do(func() {
		s := New(DefaultConfig(), nil)
		holdLeases(b, s, 100_000)
		bench100k.s, bench100k.snap = s, s.Snapshot()
	})
	return bench100k.s, bench100k.snap
}

// BenchmarkSnapshot100k: a snapshot of 100k single-resource leases.
func BenchmarkSnapshot100k(b *testing.B) {
	s, snap := state100k(b)
	b.SetBytes(int64(len(snap)))
	b.ReportAllocs()
	for b.Loop() {
		s.Snapshot()
	}
	b.ReportMetric(float64(len(snap)), "snapshot-bytes")
}

// BenchmarkRestore100k: restoring that snapshot.
func BenchmarkRestore100k(b *testing.B) {
	_, snap := state100k(b)
	b.SetBytes(int64(len(snap)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Restore(snap, DefaultConfig(), nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemory reports the heap that 100k held leases take (acquired
// with request IDs, as clients send them), and then what each remembered
// renewal adds (600k renewals: a minute at 10,000/s).
func BenchmarkMemory(b *testing.B) {
	for b.Loop() {
		heap := func() uint64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		base := heap()
		s := New(DefaultConfig(), nil)
		const n, renewals = 100_000, 600_000
		ids := make([]uint64, 0, n)
		ix := uint64(0)
		for len(ids) < n {
			ix++
			cmds := make([]Command, 0, 1000)
			for k := range 1000 {
				i := len(ids) + k
				cmds = append(cmds, &Acquire{RequestID: fmt.Sprintf("%032x", i),
					Resources: []string{fmt.Sprintf("res/%07d", i)}, Owner: fmt.Sprintf("worker-%d", i%97),
					Operation: "bench", TTL: 30 * time.Second, SecretHash: secret("bench")})
			}
			for _, r := range s.Apply(ix, &Batch{Time: t0 + int64(ix), Cmds: cmds}) {
				ids = append(ids, r.Lease.ID)
			}
		}
		held := heap()
		for i := 0; i < renewals; i += 1000 {
			ix++
			cmds := make([]Command, 0, 1000)
			for k := range 1000 {
				cmds = append(cmds, &Renew{RequestID: fmt.Sprintf("r%031x", i+k), LeaseID: ids[(i+k)%n],
					SecretHash: secret("bench"), Age: time.Second})
			}
			s.Apply(ix, &Batch{Time: t0 + int64(time.Second) + int64(i)*int64(time.Second)/10_000, Cmds: cmds})
		}
		renewed := heap()
		b.ReportMetric(float64(held-base)/n, "B/lease")
		b.ReportMetric((float64(renewed)-float64(held))/renewals, "B/renewal")
		runtime.KeepAlive(s)
	}
}

// BenchmarkTxnApply: a three-compare, three-put transaction per entry, with
// nobody listening for events and with a sink that keeps them.
func BenchmarkTxnApply(b *testing.B) {
	for _, listen := range []bool{false, true} {
		b.Run(fmt.Sprintf("events=%v", listen), func(b *testing.B) {
			var obs Observer
			if listen {
				obs = &eventLog{}
			}
			s := New(DefaultConfig(), obs)
			val := []byte("value")
			c := &Txn{Compares: []Compare{{Key: "a", Op: CompareExists}, {Key: "b", Op: CompareVersionLess, Version: 1 << 62},
				{Key: "c", Op: CompareAbsent}}, Then: []TxnOp{put("a", "1"), put("b", "2")}, Else: []TxnOp{{Key: "a", Value: val},
				{Key: "b", Value: val}, {Key: "d", Value: val}}}
			batch := &Batch{Time: t0, Cmds: []Command{c}}
			b.ReportAllocs()
			for i := range b.N {
				s.Apply(uint64(i+1), batch)
				if listen {
					obs.(*eventLog).ev = obs.(*eventLog).ev[:0]
				}
			}
		})
	}
}
