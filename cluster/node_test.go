package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fsm"
	"github.com/leasehold/leasehold/internal/testutil"
)

// freeAddr: a restarted node must come back on the address its raft
// configuration records, so these tests pick addresses, not listeners.
var freeAddr = testutil.FreeAddr

func testConfig(t testing.TB, dir string) Config {
	cfg := DefaultConfig()
	cfg.DataDir = dir
	cfg.RaftAddr = freeAddr(t)
	cfg.Logger = slog.New(slog.DiscardHandler)
	return cfg
}

func openNode(t testing.TB, cfg Config) *Node {
	t.Helper()
	n, err := Open(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.WaitLeader(ctx); err != nil {
		n.Close()
		t.Fatal(err)
	}
	return n
}

func acquireCmd(id string, ttl time.Duration, wait time.Duration, res ...string) *fsm.Acquire {
	return &fsm.Acquire{RequestID: id, Resources: res, TTL: ttl, Wait: wait, SecretHash: sha256.Sum256([]byte(id))}
}

func TestNodeRestartKeepsLeasesAndTokensGrow(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	n := openNode(t, cfg)
	ctx := context.Background()
	var last uint64
	for i := range 20 {
		r, err := n.Propose(ctx, acquireCmd(fmt.Sprint("a", i), time.Hour, 0, fmt.Sprint("r", i)))
		if err != nil || r.Err != nil {
			t.Fatalf("acquire %d: %v %v", i, err, r.Err)
		}
		if r.Lease.Token <= last {
			t.Fatalf("token %d after %d", r.Lease.Token, last)
		}
		last = r.Lease.Token
	}
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	r, err := n.Propose(ctx, acquireCmd("after-snap", time.Hour, 0, "late"))
	if err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	last = r.Lease.Token
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}

	n2 := openNode(t, cfg)
	defer n2.Close()
	var held int
	if err := n2.Read(ctx, func(s *fsm.State) { held = s.Counts().Leases }); err != nil {
		t.Fatal(err)
	}
	if held != 21 {
		t.Fatalf("after restart %d leases held, want 21", held)
	}
	r, err = n2.Propose(ctx, acquireCmd("after-restart", time.Hour, 0, "new"))
	if err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	if r.Lease.Token <= last {
		t.Fatalf("token after restart %d is not above %d", r.Lease.Token, last)
	}
	// A retried request returns the first answer, across the restart too.
	r2, err := n2.Propose(ctx, acquireCmd("after-snap", time.Hour, 0, "late"))
	if err != nil || !r2.Dup || r2.Lease == nil || r2.Lease.Token != last {
		t.Fatalf("retry after restart: %+v %v", r2, err)
	}
}

func TestLeaderExpiresLeaseAndGrantsWaiter(t *testing.T) {
	n := openNode(t, testConfig(t, t.TempDir()))
	defer n.Close()
	ctx := context.Background()
	r, err := n.Propose(ctx, acquireCmd("holder", 200*time.Millisecond, 0, "x"))
	if err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	wc := acquireCmd("waiter", time.Second, 5*time.Second, "x")
	outcome, stop := n.Watch(wc.Key())
	defer stop()
	start := time.Now()
	w, err := n.Propose(ctx, wc)
	if err != nil || !w.Queued {
		t.Fatalf("waiter not queued: %+v %v", w, err)
	}
	select {
	case got := <-outcome:
		if got.Lease == nil || got.Lease.Token <= r.Lease.Token {
			t.Fatalf("waiter outcome %+v", got)
		}
		if el := time.Since(start); el < 150*time.Millisecond {
			t.Fatalf("granted after %v, before the holder's TTL", el)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter never granted after the holder expired")
	}
}

func TestWaitTimeoutEndsWaiter(t *testing.T) {
	n := openNode(t, testConfig(t, t.TempDir()))
	defer n.Close()
	ctx := context.Background()
	if r, err := n.Propose(ctx, acquireCmd("holder", time.Hour, 0, "x")); err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	wc := acquireCmd("waiter", time.Second, 300*time.Millisecond, "x")
	outcome, stop := n.Watch(wc.Key())
	defer stop()
	if _, err := n.Propose(ctx, wc); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-outcome:
		if !errors.Is(got.Err, leasehold.ErrWaitTimeout) {
			t.Fatalf("outcome %+v, want wait timeout", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter never timed out")
	}
}

func TestDataDirLocked(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, testConfig(t, dir))
	defer n.Close()
	if _, err := Open(testConfig(t, dir), nil); err == nil {
		t.Fatal("a second node opened the same data dir")
	}
}

// A snapshot older than what the node applied is refused and changes
// nothing: only a stale sender installs one, and taking it would wind the
// state back.
func TestMachineRefusesAnOlderSnapshot(t *testing.T) {
	n := openNode(t, testConfig(t, t.TempDir()))
	defer n.Close()
	ctx := context.Background()
	propose := func(id string) {
		t.Helper()
		if r, err := n.Propose(ctx, acquireCmd(id, time.Hour, 0, id)); err != nil || r.Err != nil {
			t.Fatalf("acquire %s: %v %v", id, err, r.Err)
		}
	}
	propose("before")
	old, err := n.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	propose("after")

	err = n.m.Restore(io.NopCloser(bytes.NewReader(encoded(t, old))))
	if err == nil || !strings.Contains(err.Error(), "older than") {
		t.Fatalf("restoring an older snapshot: %v, want a refusal", err)
	}
	var leases int
	n.Read(ctx, func(s *fsm.State) { leases = s.Counts().Leases })
	if leases != 2 {
		t.Fatalf("after the refusal %d leases held, want 2", leases)
	}

	current, err := n.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.m.Restore(io.NopCloser(bytes.NewReader(encoded(t, current)))); err != nil {
		t.Fatalf("restoring the current state: %v", err)
	}
}
