package main_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/internal/smalldisk"
)

// TestServeDiskFullExitsAndRestartKeepsAcknowledged: serve on a small
// tmpfs; a ballast file fills it. The first failed log write makes serve
// exit non-zero saying the disk under its data dir is full; a restart on
// the still-full disk fails with the same clear message; once the ballast
// is gone a restart serves every lease acknowledged before the fault, and
// the next token is larger than every token issued.
func TestServeDiskFullExitsAndRestartKeepsAcknowledged(t *testing.T) {
	mnt := smalldisk.Mount(t, 24<<20)
	n := newNode(t)
	n.dataDir = filepath.Join(mnt, "data")
	n.args = []string{"--wal-segment-size", "1"}
	n.start()

	acked := map[string]uint64{} // resource -> token of an acknowledged grant
	var maxToken uint64
	pad := strings.Repeat("x", 3<<10) // fills the log fast
	seq := 0
	// acquire reports whether the node answered the acquire with a grant.
	acquire := func() (bool, string) {
		seq++
		res := fmt.Sprint("r", seq)
		code, body, err := n.post("Acquire", fmt.Sprintf(`{"resources":[%q],"ttl":"3600s","metadata":{"pad":%q}}`, res, pad))
		if err != nil || code != http.StatusOK {
			return false, fmt.Sprint(code, " ", string(body), err)
		}
		var r pb.AcquireResponse
		if err := protojson.Unmarshal(body, &r); err != nil || r.Lease.GetToken() == 0 {
			t.Fatalf("acquire %s: %v: %s", res, err, body)
		}
		acked[res] = r.Lease.Token
		maxToken = max(maxToken, r.Lease.Token)
		return true, ""
	}
	for range 20 {
		if ok, why := acquire(); !ok {
			t.Fatalf("acquire before the disk filled: %s", why)
		}
	}

	free := smalldisk.Fill(t, mnt, 0)
	var refused time.Time
	for deadline := time.Now().Add(60 * time.Second); ; {
		ok, why := acquire()
		if !ok {
			refused = time.Now()
			t.Logf("%d acquires acknowledged; the first refused: %s", len(acked), why)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("acquires still succeed on a full disk after %d", len(acked))
		}
	}
	if !n.p.Wait(30 * time.Second) {
		t.Fatalf("serve did not exit after its log write failed:\n%s", tail(n.p.Stderr(), 3000))
	}
	checkDiskFullExit(t, n.p, n.dataDir)
	t.Logf("serve exited %v after the first refusal", n.p.ExitedAt.Sub(refused).Round(time.Millisecond))

	// Still full: a restart fails at once, as clearly.
	if err := n.tryStart(); err == nil {
		t.Fatal("serve started on a full disk")
	}
	if !n.p.Wait(exitTimeout) {
		t.Fatal("serve not reaped")
	}
	checkDiskFullExit(t, n.p, n.dataDir)

	free()
	start := time.Now()
	n.start()
	t.Logf("restarted with space again: ready in %v", time.Since(start).Round(time.Millisecond))
	for res, tok := range acked {
		g, err := n.get(res)
		if err != nil {
			t.Fatal(err)
		}
		if g.Holder.GetToken() != tok {
			t.Fatalf("after the restart %s is held with token %d, want the acknowledged %d (%d acknowledged in all)",
				res, g.Holder.GetToken(), tok, len(acked))
		}
	}
	before := maxToken
	if ok, why := acquire(); !ok {
		t.Fatalf("acquire after the restart: %s", why)
	}
	if maxToken <= before {
		t.Fatalf("token after the restart %d is not above %d, the largest issued", maxToken, before)
	}
}

// TestServeSmallDiskFirstStart: on a disk smaller than a WAL segment, the
// first start fails saying a segment of 64 MiB is preallocated and which
// flag changes it; with a smaller --wal-segment-size it starts.
func TestServeSmallDiskFirstStart(t *testing.T) {
	mnt := smalldisk.Mount(t, 16<<20)
	n := newNode(t)
	n.dataDir = filepath.Join(mnt, "data")
	if err := n.tryStart(); err == nil {
		t.Fatal("serve started with a 64 MiB segment on a 16 MiB disk")
	}
	if !n.p.Wait(exitTimeout) {
		t.Fatal("serve not reaped")
	}
	stderr := n.p.Stderr()
	for _, want := range []string{"disk full", n.dataDir, "64 MiB", "preallocat", "--wal-segment-size"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("first start on a small disk: stderr lacks %q:\n%s", want, tail(stderr, 2000))
		}
	}
	n.args = []string{"--wal-segment-size", "4"}
	n.start()
}

// checkDiskFullExit checks that p exited non-zero saying the disk under
// dataDir is full, without a panic.
func checkDiskFullExit(t *testing.T, p *proc, dataDir string) {
	t.Helper()
	stderr := p.Stderr()
	if p.Code() == 0 {
		t.Errorf("%s exited 0", p.Name)
	}
	for _, want := range []string{"leasehold: ", "disk full", dataDir, "free space"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("%s: stderr lacks %q:\n%s", p.Name, want, tail(stderr, 3000))
		}
	}
	if strings.Contains(stderr, "panic") {
		t.Errorf("%s panicked:\n%s", p.Name, tail(stderr, 3000))
	}
}

// tail is the end of s, at most n bytes.
func tail(s string, n int) string { return s[max(0, len(s)-n):] }
