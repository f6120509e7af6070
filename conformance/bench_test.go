package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/procs"
)

// TestBenchPairs measures acquire+release pairs per second for each client
// against one node, with LEASEHOLD_BENCH_CALLERS concurrent callers
// (default 16) for LEASEHOLD_BENCH_SECONDS each (default 10), one client
// after the other, Go first and again last. It runs only with
// LEASEHOLD_CLIENT_BENCH=1 (it is a measurement, not a test):
//
//	LEASEHOLD_CLIENT_BENCH=1 go test -count=1 -v -run TestBenchPairs ./conformance
func TestBenchPairs(t *testing.T) {
	if os.Getenv("LEASEHOLD_CLIENT_BENCH") != "1" {
		t.Skip("a measurement: set LEASEHOLD_CLIENT_BENCH=1")
	}
	if procs.RaceEnabled() {
		t.Fatal("measure without -race")
	}
	callers, secs := envOr("LEASEHOLD_BENCH_CALLERS", "16"), envOr("LEASEHOLD_BENCH_SECONDS", "10")
	goBench := filepath.Join(filepath.Dir(goDriver), "go-bench")
	if err := procs.BuildPackage(goBench, "./bench/go"); err != nil {
		t.Fatal(err)
	}
	node := startNode(t)
	runs := []struct {
		name, why string
		argv      []string
	}{
		{"go", "", []string{goBench, callers, secs}},
		{"typescript", missing["typescript"], []string{"node", "bench/bench.mjs", callers, secs}},
		{"python", missing["python"], []string{"python3", "bench/bench.py", callers, secs}},
		{"go (again)", "", []string{goBench, callers, secs}},
	}
	var table strings.Builder
	fmt.Fprintf(&table, "acquire+release pairs/s, %s callers, %ss each, one node:\n| client | pairs/s | pairs | failures |\n|---|---|---|---|\n", callers, secs)
	for _, r := range runs {
		if r.why != "" {
			t.Errorf("%s: %s", r.name, r.why)
			continue
		}
		cmd := exec.Command(r.argv[0], r.argv[1:]...)
		cmd.Env = procs.ChildEnv("LEASEHOLD_ENDPOINT=" + node)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		var res struct {
			Pairs, Failures int
			PerSecond       float64 `json:"per_second"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("%s: %v: %s", r.name, err, out)
		}
		fmt.Fprintf(&table, "| %s | %.0f | %d | %d |\n", r.name, res.PerSecond, res.Pairs, res.Failures)
	}
	t.Log("\n" + table.String())
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
