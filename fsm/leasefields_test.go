package fsm

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// A held lease keeps its times as integers, the fields a plain lock
// leaves empty behind one pointer, and one shared copy of its owner and
// operation names: with 100,000 held leases (no request IDs, short names,
// each command decoded with its own copy of the names, as from the log)
// the state costs at most 320 bytes a lease (about 300; 434 with every
// field inline and a copy of the names per lease), and a lease reads back
// with the times it was given.
func TestHeldLeaseMemory(t *testing.T) {
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	const n = 100_000
	base := heap()
	cmds := make([]Command, n)
	for i := range cmds {
		cmds[i] = &Acquire{Resources: []string{fmt.Sprintf("r%06d", i)}, Owner: strings.Clone("worker-1"),
			Operation: strings.Clone("nightly-report"), TTL: 30 * time.Second, SecretHash: secret("s")}
	}
	s := New(DefaultConfig(), nil)
	s.Apply(1, &Batch{Time: t0, Cmds: cmds})
	cmds = nil
	per := float64(heap()-base) / n
	runtime.KeepAlive(s)
	t.Logf("%.0f bytes per held lease", per)
	if per > 320 {
		t.Fatalf("%.0f bytes per held lease, want at most 320", per)
	}
	s.Apply(2, &Batch{Time: t0 + int64(time.Second), Cmds: []Command{&Renew{LeaseID: 1, SecretHash: secret("s"), Progress: "half"}}})
	l, ok := s.Lease(1)
	if !ok || !l.AcquiredAt.Equal(time.Unix(0, t0)) || !l.RenewedAt.Equal(time.Unix(0, t0+int64(time.Second))) ||
		!l.ProgressAt.Equal(l.RenewedAt) || l.AcquiredAt.Location() != time.UTC || l.Progress != "half" {
		t.Fatalf("lease 1 reads %+v, want acquired at t0 and renewed with progress a second later, in UTC", l)
	}
}

// Leases of one owner share one copy of the owner's and the operation's
// names, also after a restore, and a name is forgotten with its last
// lease.
func TestHeldLeasesShareTheirNames(t *testing.T) {
	s := New(DefaultConfig(), nil)
	for i := range 3 {
		s.Apply(uint64(i+1), &Batch{Time: t0, Cmds: []Command{&Acquire{Resources: []string{fmt.Sprint("r", i)},
			Owner: strings.Clone("worker-1"), Operation: strings.Clone("op"), TTL: time.Minute, SecretHash: secret("s")}}})
	}
	shared := func(s *State) {
		t.Helper()
		a, b := s.leases.byID.at(1), s.leases.byID.at(3)
		if unsafe.StringData(a.Owner) != unsafe.StringData(b.Owner) || unsafe.StringData(a.Operation) != unsafe.StringData(b.Operation) {
			t.Fatal("two leases of one owner keep two copies of its names")
		}
	}
	shared(s)
	r, err := Restore(s.Snapshot(), DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	shared(r)
	for id := uint64(1); id <= 3; id++ {
		if res := r.Apply(10+id, &Batch{Time: t0, Cmds: []Command{&Release{LeaseID: id, SecretHash: secret("s")}}}); res[0].Err != nil {
			t.Fatal(res[0].Err)
		}
	}
	if len(r.leases.owners) != 0 || len(r.leases.operations) != 0 {
		t.Fatalf("names kept after their last lease ended: %d owners, %d operations", len(r.leases.owners), len(r.leases.operations))
	}
}

// A plain lock's acquire and release allocate nothing for the fields it
// leaves empty or for its names: an entry of one acquire and its release
// costs at most 10 allocations (an escaping copy of the rare fields and a
// pointer per name made it 13).
func TestPlainLockAllocations(t *testing.T) {
	s := New(DefaultConfig(), nil)
	acq := &Acquire{Resources: []string{"jobs/1"}, Owner: "worker-1", Operation: "bench", TTL: 15 * time.Second,
		SecretHash: secret("bench")}
	rel := &Release{SecretHash: secret("bench")}
	batch := &Batch{Time: t0, Cmds: []Command{acq, rel}}
	ids := make([]string, 0, 400)
	for i := range 400 {
		ids = append(ids, fmt.Sprintf("%032x", i))
	}
	ix, i := uint64(0), 0
	allocs := testing.AllocsPerRun(100, func() {
		ix++
		batch.Time += int64(time.Second)
		acq.RequestID, rel.RequestID = ids[i], ids[i+1]
		i += 2
		rel.LeaseID = max(ix, s.LastToken()+1)
		if out := s.Apply(ix, batch); out[1].Err != nil {
			t.Fatal(out[1].Err)
		}
	})
	if allocs > 10 {
		t.Fatalf("%.0f allocations for an acquire and its release, want at most 10", allocs)
	}
	if n := s.leases.byID.len(); n != 0 {
		t.Fatalf("%d leases left", n)
	}
}
