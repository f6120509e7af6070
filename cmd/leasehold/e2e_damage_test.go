package main_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestServeRefusesDamagedLogAndRecovers: a `serve` process is killed, the
// disk loses the end of its log (acknowledged leases), and then: serve
// refuses to start with a message naming the damage instead of starting
// without those leases; `recover` refuses to act without a terminal or
// --yes; with --yes it keeps the intact prefix; serve starts again; and
// the next token is above every token answered before the damage.
func TestServeRefusesDamagedLogAndRecovers(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	var maxToken uint64
	for _, res := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		maxToken = max(maxToken, n.acquire("--ttl", "1m", "jobs/"+res).Token)
	}
	n.kill()

	// The disk lost the last writes of the log's newest segment.
	segs, err := filepath.Glob(filepath.Join(n.dataDir, "wal", "*.wal"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("log segments: %v %v", segs, err)
	}
	slices.Sort(segs)
	tail := segs[len(segs)-1]
	data, err := os.ReadFile(tail)
	if err != nil {
		t.Fatal(err)
	}
	written := len(strings.TrimRight(string(data), "\x00"))
	if err := os.Truncate(tail, int64(written-300)); err != nil {
		t.Fatal(err)
	}

	err = n.tryStart()
	if err == nil {
		t.Fatal("serve started on a log that lost acknowledged entries")
	}
	msg := n.p.Stderr()
	for _, want := range []string{"the log is damaged in " + tail, "intact up to index", "leasehold recover --data-dir " + n.dataDir, "Failure semantics"} {
		if !strings.Contains(msg, want) {
			t.Errorf("serve's refusal does not say %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "goroutine ") || strings.Contains(msg, "panic") {
		t.Errorf("serve panicked on the damaged log:\n%s", msg)
	}

	r := lhEnv(t, childEnv(), "recover", "--data-dir", n.dataDir)
	if r.code == 0 || !strings.Contains(r.stderr, "pass --yes") || !strings.Contains(r.stdout, "LOSE every entry from index") {
		t.Fatalf("recover without a terminal or --yes: want a refusal after the plan, got %s", r)
	}
	r = lhEnv(t, childEnv(), "recover", "--data-dir", n.dataDir, "--yes")
	if r.code != 0 || !strings.Contains(r.stdout, "recovered: the log is kept up to index") {
		t.Fatalf("recover --yes: %s", r)
	}
	t.Logf("recover --yes:\n%s", r.stdout)

	n.start()
	for _, res := range []string{"jobs/h", "jobs/new"} {
		a := n.acquire("--ttl", "1m", res)
		if a.Token <= maxToken {
			t.Errorf("acquire %s after the recovery: token %d, but %d was answered before the damage", res, a.Token, maxToken)
		}
		maxToken = a.Token
	}
}
