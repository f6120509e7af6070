package fsm

import (
	"bytes"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fsm/testdata/legacy-* were written by the code before request IDs were
// scoped to their caller (commit 998bb6e; log entries of batch version 1,
// snapshots of version 4): ten entries that grant, queue, retry a waiter
// with another secret (which then took the place over), cancel, renew,
// release, force-release and write keys, and the snapshots after the
// seventh entry and at the end.

type legacyEntry struct {
	ix  uint64
	raw []byte
	b   *Batch
}

func legacyLog(t testing.TB) []legacyEntry {
	t.Helper()
	raw, err := os.ReadFile("testdata/legacy-v1.log.hex")
	if err != nil {
		t.Fatal(err)
	}
	var log []legacyEntry
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		ixs, hx, _ := strings.Cut(line, " ")
		ix, err := strconv.ParseUint(ixs, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		data, err := hex.DecodeString(hx)
		if err != nil {
			t.Fatal(err)
		}
		if data[0] != 1 {
			t.Fatalf("entry %d has version %d, want a version 1 entry", ix, data[0])
		}
		b, err := DecodeBatch(data)
		if err != nil {
			t.Fatalf("entry %d: %v", ix, err)
		}
		log = append(log, legacyEntry{ix, data, b})
	}
	return log
}

// legacySnapshotBytes reads an old snapshot fixture.
func legacySnapshotBytes(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	data, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func legacySnapshot(t *testing.T, name string) *State {
	t.Helper()
	data := legacySnapshotBytes(t, name)
	if data[len(snapMagic)] != 4 {
		t.Fatalf("%s has version %d, want a version 4 snapshot", name, data[len(snapMagic)])
	}
	s, err := Restore(data, DefaultConfig(), nil)
	if err != nil {
		t.Fatalf("restore %s: %v", name, err)
	}
	return s
}

// A node replaying an old log reaches the state the old code reached (its
// snapshot), and a node restored from the old snapshot goes on alike: old
// entries keep the old meaning of a request ID (unscoped, no fingerprint).
func TestLegacyLogAndSnapshot(t *testing.T) {
	log := legacyLog(t)
	mid, end := legacySnapshot(t, "legacy-v4.snapshot.hex"), legacySnapshot(t, "legacy-v4-end.snapshot.hex")
	const snapAfter = 7

	replay := New(DefaultConfig(), nil)
	for i, e := range log {
		replay.Apply(e.ix, e.b)
		if i+1 == snapAfter && !bytes.Equal(replay.Snapshot(), mid.Snapshot()) {
			t.Fatalf("replaying the old log's first %d entries gives another state than the old snapshot", snapAfter)
		}
	}
	if !bytes.Equal(replay.Snapshot(), end.Snapshot()) {
		t.Fatal("replaying the old log gives another state than the old code's")
	}
	for _, e := range log[snapAfter:] {
		mid.Apply(e.ix, e.b)
	}
	if !bytes.Equal(mid.Snapshot(), end.Snapshot()) {
		t.Fatal("the old snapshot and the rest of the old log give another state than the old code's")
	}
	// What the old entries did: the retry with another secret took w1's
	// place over, so its attempt's Cancel (by bare request ID) released
	// w1's grant, and x went to w3.
	if l, ok := end.Holder("x"); !ok || l.Owner != "o-w3" {
		t.Fatalf("x is held by %+v, want w3's lease", l)
	}
	// The restored state writes the current version, and reads it back.
	again, err := Restore(end.Snapshot(), DefaultConfig(), nil)
	if err != nil || !bytes.Equal(again.Snapshot(), end.Snapshot()) {
		t.Fatalf("a version %d snapshot of a legacy state does not round-trip: %v", snapVersion, err)
	}
}

// A request from now on never finds a legacy record: its key is scoped,
// and a legacy key is a bare request ID.
func TestLegacyRecordsAreNotScopedRequests(t *testing.T) {
	s := legacySnapshot(t, "legacy-v4-end.snapshot.hex")
	ix := s.LastIndex()
	// w3 holds x under a legacy record; the same request ID, caller and
	// secret, sent now, is a request of its own (and finds x held).
	c := &Acquire{RequestID: "w3", Resources: []string{"z"}, Owner: "o-w3", Operation: "op", TTL: 10 * time.Second,
		SecretHash: secret("w3")}
	r := s.Apply(ix+1, &Batch{Time: t0 + int64(ix+1), Cmds: []Command{c}})[0]
	if r.Dup || r.Lease == nil || r.Lease.Resources[0] != "z" {
		t.Fatalf("a new acquire with a legacy record's request ID: %s, want a grant of its own", summarize(r))
	}
}
