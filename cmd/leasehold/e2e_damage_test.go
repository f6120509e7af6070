package main_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/fsm"
	"github.com/leasehold/leasehold/internal/walfile"
)

// TestServeRefusesDamageAndRecovers: a `serve` process is killed and its
// data dir damaged, each way below; then serve refuses to start with a
// message naming the file and what is lost (never a panic, never starting
// as if the log were shorter); `recover` refuses to act without a
// terminal or --yes; with --yes it repairs the data dir and says what it
// lost; serve starts again; and the next token is above every token
// answered before the damage.
func TestServeRefusesDamageAndRecovers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// damage damages a stopped node's data dir (prepared by prepare, or
		// by a serve that granted leases) and returns what serve and recover
		// must say.
		prepare func(t *testing.T, n *node) uint64
		damage  func(t *testing.T, n *node) (refusal, plan []string)
	}{
		{"tail cut off", nil, func(t *testing.T, n *node) ([]string, []string) {
			tail := lastSegment(t, n)
			written := len(strings.TrimRight(string(readFile(t, tail)), "\x00"))
			if err := os.Truncate(tail, int64(written-300)); err != nil {
				t.Fatal(err)
			}
			return []string{"the log is damaged in " + tail, "its end was cut off", "intact up to index"},
				[]string{"LOSE any entries after index"}
		}},
		{"frame header zeroed mid-segment", nil, func(t *testing.T, n *node) ([]string, []string) {
			tail := lastSegment(t, n)
			off := midEntryFrame(t, tail)
			data := readFile(t, tail)
			clear(data[off : off+8])
			writeFile(t, tail, data)
			return []string{fmt.Sprintf("the log is damaged in %s at byte %d: the frame header at byte %d is zero, but writes that verify follow it", tail, off, off),
					"cannot be read from this data dir"},
				[]string{"LOSE entries"}
		}},
		{"token floor garbled", nil, func(t *testing.T, n *node) ([]string, []string) {
			path := filepath.Join(n.dataDir, cluster.TokenFloorFile)
			writeFile(t, path, []byte("9x1\n"))
			return []string{path, "the token floor file is damaged", "no entry is lost"},
				[]string{"save a token floor of", "lose no entry"}
		}},
		{"snapshots gone from a compacted log", compactedDataDir, func(t *testing.T, n *node) ([]string, []string) {
			dir := filepath.Join(n.dataDir, "snapshots")
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			return []string{dir, "no snapshot there holds the entries before the log's first"},
				[]string{"drop the whole log", "start this node again as a new single-node cluster"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var n *node
			var maxToken uint64
			if tc.prepare != nil {
				n = newNode(t)
				maxToken = tc.prepare(t, n)
			} else {
				n = startNode(t)
				for _, res := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
					maxToken = max(maxToken, n.acquire("--ttl", "1m", "jobs/"+res).Token)
				}
				n.kill()
			}
			refusal, plan := tc.damage(t, n)

			if err := n.tryStart(); err == nil {
				t.Fatal("serve started on a damaged data dir")
			}
			msg := n.p.Stderr()
			for _, want := range append(refusal, "leasehold recover --data-dir "+n.dataDir, "docs/failure-semantics.md") {
				if !strings.Contains(msg, want) {
					t.Errorf("serve's refusal does not say %q:\n%s", want, msg)
				}
			}
			if strings.Contains(msg, "goroutine ") || strings.Contains(msg, "panic") {
				t.Errorf("serve panicked on the damaged data dir:\n%s", msg)
			}

			r := lhEnv(t, childEnv(), "recover", "--data-dir", n.dataDir)
			if r.code == 0 || !strings.Contains(r.stderr, "pass --yes") {
				t.Fatalf("recover without a terminal or --yes: want a refusal after the plan, got %s", r)
			}
			for _, want := range plan {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("recover's plan does not say %q:\n%s", want, r.stdout)
				}
			}
			r = lhEnv(t, childEnv(), "recover", "--data-dir", n.dataDir, "--yes")
			if r.code != 0 || !strings.Contains(r.stdout, "recovered: the state is kept up to index") {
				t.Fatalf("recover --yes: %s", r)
			}
			t.Logf("recover --yes:\n%s", r.stdout)
			if r := lhEnv(t, childEnv(), "recover", "--data-dir", n.dataDir); r.code != 0 || !strings.Contains(r.stdout, "nothing to recover") {
				t.Errorf("recover of the repaired dir: %s", r)
			}

			n.start()
			for _, res := range []string{"after/1", "after/2"} {
				a := n.acquire("--ttl", "1m", res)
				if a.Token <= maxToken {
					t.Errorf("acquire %s after the recovery: token %d, but %d was answered before the damage", res, a.Token, maxToken)
				}
				maxToken = a.Token
			}
		})
	}
}

// compactedDataDir writes n's data dir with a node run in this process
// (serve compacts its log only after thousands of entries): leases, a
// snapshot, and a log compacted after it. It returns the largest token.
func compactedDataDir(t *testing.T, n *node) uint64 {
	cfg := cluster.DefaultConfig()
	cfg.DataDir, cfg.NodeID, cfg.RaftAddr = n.dataDir, "n1", n.raftAddr
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.WALSegmentSize, cfg.TrailingLogs, cfg.SnapshotThreshold = 2048, 4, 1<<30
	c, err := cluster.Open(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	var maxToken uint64
	for i := range 30 {
		if i == 25 {
			if err := c.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
		id := fmt.Sprint("req-", i)
		r, err := c.Propose(ctx, &fsm.Acquire{RequestID: id, Resources: []string{fmt.Sprint("jobs/", i)}, TTL: time.Minute, SecretHash: sha256.Sum256([]byte(id))})
		if err != nil || r.Err != nil {
			t.Fatal(err, r.Err)
		}
		maxToken = max(maxToken, r.Lease.Token)
	}
	return maxToken
}

func lastSegment(t *testing.T, n *node) string {
	t.Helper()
	seg, err := walfile.LastSegment(n.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	return seg
}

// midEntryFrame is the offset of an entry frame in the middle of a
// segment.
func midEntryFrame(t *testing.T, path string) int64 {
	t.Helper()
	entries, err := walfile.Entries(path)
	if err != nil {
		t.Fatal(err)
	}
	return entries[len(entries)/2].Offset
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
