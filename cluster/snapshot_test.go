package cluster

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/hashicorp/raft"
)

// encoded is the encoding of a machine snapshot, as Persist writes it.
func encoded(t *testing.T, s raft.FSMSnapshot) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := s.(snapshot).WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A raft snapshot of many leases is not held in memory: taking one of
// 20,000 leases allocates a small part of its size (the encoding is
// streamed into raft's file), and persists the state.
func TestSnapshotIsStreamedNotHeld(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, testConfig(t, dir))
	defer n.Close()
	holdLeases(t, n, 20_000)

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	metas, err := os.ReadDir(filepath.Join(dir, "snapshots"))
	if err != nil || len(metas) == 0 {
		t.Fatalf("no snapshot persisted: %v", err)
	}
	st, err := os.Stat(filepath.Join(dir, "snapshots", metas[len(metas)-1].Name(), "state.bin"))
	if err != nil {
		t.Fatal(err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("a %d-byte snapshot took %d bytes of allocations", st.Size(), alloc)
	if alloc > uint64(st.Size())/4 {
		t.Fatalf("a %d-byte snapshot allocated %d bytes, want at most a quarter of its size", st.Size(), alloc)
	}
}
