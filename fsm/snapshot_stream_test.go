package fsm

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// A streamed snapshot is Snapshot's bytes, handed over in slices as they
// are encoded: writing 20,000 leases (with their remembered acquires)
// allocates a small part of the encoding's size, not a copy of it.
func TestWriteSnapshotStreams(t *testing.T) {
	s := New(DefaultConfig(), nil)
	const n = 20_000
	for i := 0; i < n; i += 1000 {
		cmds := make([]Command, 1000)
		for k := range cmds {
			cmds[k] = &Acquire{RequestID: fmt.Sprintf("%032x", i+k), Resources: []string{fmt.Sprintf("res/%07d", i+k)},
				Owner: "worker", Operation: "bench", TTL: 30 * time.Second, SecretHash: secret("bench")}
		}
		s.Apply(uint64(i+1), &Batch{Time: t0, Cmds: cmds})
	}
	want := s.Snapshot()
	h := sha256.New()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := s.WriteSnapshot(h)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(want); !bytes.Equal(h.Sum(nil), sum[:]) {
		t.Fatal("the streamed snapshot differs from Snapshot's bytes")
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("a %d-byte snapshot streamed with %d bytes allocated", len(want), alloc)
	if alloc > uint64(len(want))/8 {
		t.Fatalf("streaming a %d-byte snapshot allocated %d bytes, want at most an eighth of it", len(want), alloc)
	}
}
