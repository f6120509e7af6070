package main_test

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// gzipMagic starts every pprof profile (gzipped protobuf).
var gzipMagic = []byte{0x1f, 0x8b}

// TestProfilesAreWritten: serve --cpuprofile writes its profile when it
// stops on SIGTERM, and bench --memprofile (with --cpuprofile) writes both
// at the end of the run: the profiles behind the README's account of where
// an operation's CPU goes.
func TestProfilesAreWritten(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cpu := filepath.Join(dir, "serve.prof")
	n := newNode(t)
	n.args = []string{"--cpuprofile", cpu}
	n.start()
	n.acquire("--ttl", "1m", "prof/x")
	n.signal(syscall.SIGTERM)
	if !n.p.Wait(15 * time.Second) {
		t.Fatalf("serve still running 15s after SIGTERM\n%s", n.p.Stderr())
	}
	checkProfile(t, cpu)

	bcpu, bmem := filepath.Join(dir, "bench.prof"), filepath.Join(dir, "bench.mem")
	r := lhEnv(t, childEnv(), "bench", "--embedded", "--clients", "2", "--ops", "50", "--warmup", "0s",
		"--cpuprofile", bcpu, "--memprofile", bmem)
	if r.code != 0 {
		t.Fatalf("bench --cpuprofile --memprofile: exit %d\n%s", r.code, r)
	}
	checkProfile(t, bcpu)
	checkProfile(t, bmem)
}

func checkProfile(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, gzipMagic) {
		t.Errorf("%s is not a pprof profile (%d bytes)", filepath.Base(path), len(b))
	}
}
