package cluster

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

// openWAL opens a raft-wal log in dir; close it with the returned func.
func openWAL(t *testing.T, dir string) (*raftwal.WAL, func()) {
	t.Helper()
	meta := &metadb.BoltMetaDB{}
	w, err := raftwal.Open(dir, raftwal.WithMetaStore(meta))
	if err != nil {
		t.Fatal(err)
	}
	return w, func() { w.Close(); meta.Close() }
}

func entries(term uint64, from, to uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("%d@%d", i, term))})
	}
	return out
}

// truncateTailAndRestart writes entries 1-10 (term 1), drops 8-10 as a
// follower does when a new leader's log conflicts, appends 8-9 of term 2,
// closes the log and opens it again.
func truncateTailAndRestart(t *testing.T, dir string, wrap func(*raftwal.WAL) raft.LogStore) *raftwal.WAL {
	t.Helper()
	w, closeW := openWAL(t, dir)
	store := wrap(w)
	if err := store.StoreLogs(entries(1, 1, 10)); err != nil {
		t.Fatal(err)
	}
	if err := store.DeleteRange(8, 10); err != nil {
		t.Fatal(err)
	}
	if err := store.StoreLogs(entries(2, 8, 9)); err != nil {
		t.Fatal(err)
	}
	closeW()
	w, closeW = openWAL(t, dir)
	t.Cleanup(closeW)
	return w
}

// The raft-wal bug the wrapper exists for. If this starts failing, raft-wal
// has fixed hashicorp/raft-wal#31 and tailSafeLog can go.
func TestRaftWALLosesEntriesAfterTailTruncationAndRestart(t *testing.T) {
	w := truncateTailAndRestart(t, t.TempDir(), func(w *raftwal.WAL) raft.LogStore { return w })
	var e raft.Log
	err := w.GetLog(1, &e)
	if err == nil || !strings.Contains(err.Error(), "no index block") {
		t.Fatalf("GetLog(1) after a tail truncation and a restart: %v; raft-wal may have fixed its bug", err)
	}
}

func TestTailSafeLogKeepsEntriesAcrossRestart(t *testing.T) {
	t.Run("no snapshot: every kept entry is rewritten", func(t *testing.T) {
		w := truncateTailAndRestart(t, t.TempDir(), func(w *raftwal.WAL) raft.LogStore {
			return &tailSafeLog{WAL: w, snaps: raft.NewInmemSnapshotStore()}
		})
		wantLog(t, w, 1, 9)
	})
	t.Run("after a snapshot: the entries a restart replays", func(t *testing.T) {
		snaps := raft.NewInmemSnapshotStore()
		sink, err := snaps.Create(raft.SnapshotVersionMax, 5, 1, raft.Configuration{}, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(sink, "state")
		sink.Close()
		w := truncateTailAndRestart(t, t.TempDir(), func(w *raftwal.WAL) raft.LogStore {
			return &tailSafeLog{WAL: w, snaps: snaps}
		})
		wantLog(t, w, 6, 9)
	})
}

// wantLog checks that the log holds exactly first..last: 1-7 of term 1,
// 8-9 of term 2.
func wantLog(t *testing.T, w *raftwal.WAL, first, last uint64) {
	t.Helper()
	if f, _ := w.FirstIndex(); f != first {
		t.Errorf("first index %d, want %d", f, first)
	}
	if l, _ := w.LastIndex(); l != last {
		t.Errorf("last index %d, want %d", l, last)
	}
	for i := first; i <= last; i++ {
		var e raft.Log
		if err := w.GetLog(i, &e); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		term := uint64(1)
		if i >= 8 {
			term = 2
		}
		if want := fmt.Sprintf("%d@%d", i, term); string(e.Data) != want || e.Term != term {
			t.Errorf("entry %d: %q term %d, want %q term %d", i, e.Data, e.Term, want, term)
		}
	}
}

// raft keeps the entries after an installed snapshot only if the log does
// not claim to be monotonic; the append past the gap such an install can
// leave must then work.
func TestTailSafeLogAppendsPastASnapshotGap(t *testing.T) {
	w, closeW := openWAL(t, t.TempDir())
	defer closeW()
	store := &tailSafeLog{WAL: w, snaps: raft.NewInmemSnapshotStore()}
	if _, ok := raft.LogStore(store).(raft.MonotonicLogStore); !ok || store.IsMonotonic() {
		t.Fatal("tailSafeLog must tell raft it is not monotonic")
	}
	if err := store.StoreLogs(entries(1, 1, 10)); err != nil {
		t.Fatal(err)
	}
	// A snapshot at 20 was installed; the next append is 21.
	if err := store.StoreLog(entries(2, 21, 21)[0]); err != nil {
		t.Fatalf("append past the gap: %v", err)
	}
	if err := store.StoreLogs(entries(2, 22, 23)); err != nil {
		t.Fatal(err)
	}
	if f, _ := store.FirstIndex(); f != 21 {
		t.Errorf("first index %d, want 21", f)
	}
	if l, _ := store.LastIndex(); l != 23 {
		t.Errorf("last index %d, want 23", l)
	}
	// An append that repeats an index is still refused.
	if err := store.StoreLogs(entries(2, 23, 23)); err == nil {
		t.Error("an append that repeats index 23 was accepted")
	}
}
