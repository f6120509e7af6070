package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/procs"
)

// TestServeFlagsFromEnvironment: every serve flag can come from its
// LEASEHOLD_* variable; a flag on the command line wins over it, and a
// value the flag refuses is a usage error (exit 2) naming the variable.
// `leasehold health` answers 0 for the node started from the environment.
func TestServeFlagsFromEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	api, raft := freeAddr(t), freeAddr(t)
	env := childEnv(
		"LEASEHOLD_DATA_DIR="+filepath.Join(dir, "data"),
		"LEASEHOLD_API_ADDR=127.0.0.1:1", // overridden by --api-addr below
		"LEASEHOLD_RAFT_ADDR="+raft,
		"LEASEHOLD_NODE_ID=envnode",
		"LEASEHOLD_WATCH_HISTORY=2000",
		"LEASEHOLD_BODY_TIMEOUT=20s",
	)
	p := startProc(t, dir, "serve-env", env, "serve", "--api-addr", api)
	if err := procs.WaitReady(p, "http://"+api, readyTimeout); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); err != nil {
		t.Errorf("LEASEHOLD_DATA_DIR was not used: %v", err)
	}
	if r := lhEnv(t, childEnv(), "health", "--endpoints", "http://"+api); r.code != 0 || !strings.Contains(r.stdout, "leader envnode") {
		t.Errorf("health of the node started from the environment (LEASEHOLD_NODE_ID=envnode): want exit 0 and its leader id\n%s", r)
	}

	for _, tc := range []struct{ name, env, want string }{
		{"float", "LEASEHOLD_ACQUIRE_RATE=fast", `LEASEHOLD_ACQUIRE_RATE="fast" (for --acquire-rate)`},
		{"duration", "LEASEHOLD_BODY_TIMEOUT=soon", `LEASEHOLD_BODY_TIMEOUT="soon" (for --body-timeout)`},
		{"bool", "LEASEHOLD_INSECURE=maybe", `LEASEHOLD_INSECURE="maybe" (for --insecure)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := lhEnv(t, childEnv(tc.env, "LEASEHOLD_DATA_DIR="+filepath.Join(t.TempDir(), "d")), "serve",
				"--api-addr", freeAddr(t), "--raft-addr", freeAddr(t))
			if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("serve with %s: want exit 2 and an error naming %q\n%s", tc.env, tc.want, r)
			}
		})
	}
}

// TestHealthNotReady: health exits 7 (unavailable) when no node answers.
func TestHealthNotReady(t *testing.T) {
	t.Parallel()
	r := lhEnv(t, childEnv(), "health", "--endpoints", "http://"+freeAddr(t), "--timeout", "5s")
	if r.code != 7 || !strings.Contains(r.stderr, "is not ready") {
		t.Errorf("health with nobody listening: want exit 7 and 'is not ready'\n%s", r)
	}
}

// TestBenchPlotIsSVGOnly: --plot takes an .svg file; a .png is a usage
// error (exit 2) that says how to make one from the SVG.
func TestBenchPlotIsSVGOnly(t *testing.T) {
	t.Parallel()
	r := lhEnv(t, childEnv(), "bench", "--embedded", "--plot", filepath.Join(t.TempDir(), "p.png"))
	if r.code != 2 || !strings.Contains(r.stderr, "must end in .svg") || !strings.Contains(r.stderr, "rsvg-convert") {
		t.Errorf("bench --plot p.png: want exit 2 and how to convert\n%s", r)
	}
}
