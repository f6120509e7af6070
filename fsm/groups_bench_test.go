package fsm

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkGroupMemory reports the heap a partition takes (one group of
// 65,536 partitions, shared by its members) and a member takes (its
// session lease with 20-byte names and no metadata, and its place in the
// group), at 1,000 groups of 4 members.
//
//	go test -run '^$' -bench BenchmarkGroupMemory -benchtime 1x ./fsm
func BenchmarkGroupMemory(b *testing.B) {
	for b.Loop() {
		base := heapInUse()
		big := New(DefaultConfig(), nil)
		big.Apply(1, &Batch{Time: t0, Cmds: []Command{&GroupCreate{Group: "big", Partitions: MaxGroupPartitions}}})
		big.Apply(2, &Batch{Time: t0, Cmds: []Command{&GroupJoin{Group: "big", Member: "m", TTL: time.Minute, SecretHash: secret("m")}}})
		b.ReportMetric(float64(heapInUse()-base)/MaxGroupPartitions, "B/partition")
		runtime.KeepAlive(big)

		base = heapInUse()
		s := New(DefaultConfig(), nil)
		const groups, members = 1000, 4
		ix := uint64(0)
		for g := range groups {
			ix++
			name := fmt.Sprintf("orders/%013d", g)
			s.Apply(ix, &Batch{Time: t0, Cmds: []Command{&GroupCreate{Group: name, Partitions: 1}}})
		}
		afterGroups := heapInUse()
		for g := range groups {
			cmds := make([]Command, 0, members)
			for m := range members {
				cmds = append(cmds, &GroupJoin{Group: fmt.Sprintf("orders/%013d", g), Member: fmt.Sprintf("worker-%013d", m),
					TTL: time.Minute, SecretHash: secret(fmt.Sprint(m))})
			}
			ix++
			for _, r := range s.Apply(ix, &Batch{Time: t0, Cmds: cmds}) {
				if r.Err != nil {
					b.Fatal(r.Err)
				}
			}
		}
		b.ReportMetric(float64(heapInUse()-afterGroups)/(groups*members), "B/member")
		b.ReportMetric(float64(afterGroups-base)/groups, "B/group")
		runtime.KeepAlive(s)
	}
}

// BenchmarkGroupRebalance measures the apply of 10 members joining a
// group of 1,024 partitions held by one member, at once (one log entry of
// 10 joins, each recomputing the assignment: join-ms), then of the
// acknowledgements that hand the revoked partitions over (one entry:
// ack-ms).
//
//	go test -run '^$' -bench BenchmarkGroupRebalance -benchtime 100x ./fsm
func BenchmarkGroupRebalance(b *testing.B) {
	var joinTime, ackTime time.Duration
	for b.Loop() {
		s := New(DefaultConfig(), nil)
		s.Apply(1, &Batch{Time: t0, Cmds: []Command{&GroupCreate{Group: "g", Partitions: 1024}}})
		s.Apply(2, &Batch{Time: t0, Cmds: []Command{&GroupJoin{Group: "g", Member: "first", TTL: time.Minute, SecretHash: secret("first")}}})
		joins := make([]Command, 10)
		for i := range joins {
			joins[i] = &GroupJoin{Group: "g", Member: fmt.Sprint("m", i), TTL: time.Minute, SecretHash: secret(fmt.Sprint(i))}
		}
		start := time.Now()
		for _, r := range s.Apply(3, &Batch{Time: t0, Cmds: joins}) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		joinTime += time.Since(start)
		d, _ := s.Group("g")
		if d.PendingRevocations < 900 {
			b.Fatalf("%d revocations pending", d.PendingRevocations)
		}
		var acks []Command
		for _, p := range d.Partitions {
			if p.Revoking {
				acks = append(acks, &GroupRevoked{Group: "g", Member: p.Owner, LeaseID: p.LeaseID, SecretHash: secret("first"),
					Partition: p.Partition, Epoch: p.Epoch})
			}
		}
		start = time.Now()
		for _, r := range s.Apply(4, &Batch{Time: t0, Cmds: acks}) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		ackTime += time.Since(start)
	}
	b.ReportMetric(float64(joinTime.Microseconds())/1000/float64(b.N), "join-ms")
	b.ReportMetric(float64(ackTime.Microseconds())/1000/float64(b.N), "ack-ms")
}
