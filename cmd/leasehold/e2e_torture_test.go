package main_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tortureReport is the part of `torture -o json` the tests read.
type tortureReport struct {
	Operations          int64          `json:"operations"`
	Faults              int            `json:"faults"`
	FaultsByClass       map[string]int `json:"faults_by_class"`
	FaultErrors         int            `json:"fault_errors"`
	Linearizability     string         `json:"linearizability"`
	QueueDrained        bool           `json:"queue_drained"`
	StaleWritesAccepted int            `json:"stale_writes_accepted"`
	Primitives          []struct {
		Primitive string `json:"primitive"`
		OK        int64  `json:"ok"`
	} `json:"primitives"`
	FaultLog []struct {
		Class  string `json:"class"`
		Exit   *int   `json:"exit"`
		Output string `json:"output"`
	} `json:"fault_log"`
	Violations []struct {
		Check, Msg string
	} `json:"violations"`
}

// torture runs `leasehold torture args...` to its end (bounded by
// timeout) and returns its stdout and exit status.
func torture(t *testing.T, timeout time.Duration, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	p := startProc(t, t.TempDir(), "torture", childEnv(), append([]string{"torture"}, args...)...)
	if !p.Wait(timeout) {
		t.Fatalf("torture %s did not end within %v:\n%s", strings.Join(args, " "), timeout, p.Stderr())
	}
	return p.Stdout(), p.Stderr(), p.Code()
}

func parseTorture(t *testing.T, stdout, stderr string) tortureReport {
	t.Helper()
	var rep tortureReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("torture -o json: %v\nstdout: %s\nstderr: %s", err, stdout, stderr)
	}
	return rep
}

// TestTortureLocalShort is CI's short torture: three local nodes paused,
// killed, run on skewed clocks and partitioned (in network namespaces:
// it needs root, and fails rather than skip without) for a minute under
// the mixed workload.
// Every check must pass, every fault class must have been injected, and
// every primitive must have done work.
func TestTortureLocalShort(t *testing.T) {
	hist := filepath.Join(t.TempDir(), "history.jsonl")
	stdout, stderr, code := torture(t, 4*time.Minute, "--local", "3", "--duration", "60s", "--faults", "pause,kill,skew,partition",
		"--fault-every", "10s", "--history", hist, "-o", "json")
	rep := parseTorture(t, stdout, stderr)
	if code != 0 || len(rep.Violations) > 0 {
		t.Errorf("torture exited %d with %d violations: %v\nstderr: %s", code, len(rep.Violations), rep.Violations, stderr)
	}
	for _, class := range []string{"pause", "kill", "skew", "partition"} {
		if rep.FaultsByClass[class] == 0 {
			t.Errorf("no %s fault injected: %v", class, rep.FaultsByClass)
		}
	}
	if rep.FaultErrors > 0 {
		t.Errorf("%d faults failed to inject:\n%s", rep.FaultErrors, stderr)
	}
	if rep.Linearizability != "ok" || !rep.QueueDrained {
		t.Errorf("linearizability %q, queue drained %v", rep.Linearizability, rep.QueueDrained)
	}
	ok := map[string]int64{}
	for _, p := range rep.Primitives {
		ok[p.Primitive] = p.OK
	}
	for _, prim := range []string{"lease", "kv", "queue", "group", "election", "idem"} {
		if ok[prim] < 10 {
			t.Errorf("%s: only %d operations answered OK: the workload did not run it", prim, ok[prim])
		}
	}
	if lines := countLines(t, hist); int64(lines) < rep.Operations {
		t.Errorf("--history has %d lines for %d operations", lines, rep.Operations)
	}
	t.Logf("%d operations, faults %v", rep.Operations, rep.FaultsByClass)
}

// TestTortureCatchesUnfencedWrites breaks the resource on purpose: the
// stalled holders' writes go without their fence, as to a resource that
// does not check tokens. torture must find the stale writes, exit 1, and
// print the operations that show one.
func TestTortureCatchesUnfencedWrites(t *testing.T) {
	stdout, stderr, code := torture(t, 3*time.Minute, "--local", "3", "--duration", "20s", "--faults", "none",
		"--unsafe-skip-fence")
	if code != 1 {
		t.Fatalf("torture exited %d, want 1\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "stale_write_accepted: ") || !strings.Contains(stdout, `"op":"put_stale"`) ||
		!strings.Contains(stdout, `"op":"acquire"`) {
		t.Errorf("no excerpt of a stale write and the grant it came after:\n%s", stdout)
	}
	if !strings.Contains(stderr, "violations") {
		t.Errorf("stderr does not say why it failed: %s", stderr)
	}
}

// TestTortureCatchesSkewBeyondAllowance runs the nodes on clocks 25% off
// real time, far beyond the client's drift allowance (2% and 10ms), with
// leadership moved between the fast and the slow one: a leader whose
// clock runs fast expires leases before their holders' safe deadlines,
// and torture must see the holders overlap, exit 1, and show them.
func TestTortureCatchesSkewBeyondAllowance(t *testing.T) {
	stdout, stderr, code := torture(t, 3*time.Minute, "--local", "3", "--duration", "30s", "--faults", "skew",
		"--skew-rate", "0.25", "--fault-every", "6s")
	if code != 1 || !strings.Contains(stdout, "double_owner: ") {
		t.Fatalf("torture exited %d, want 1 with a double owner shown\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

// TestTortureFaultCmd runs torture against a node it did not start, with
// a fault command: the command runs between phases, its status and output
// are recorded, and the run removes every key it made.
func TestTortureFaultCmd(t *testing.T) {
	n := startNode(t)
	stdout, stderr, code := torture(t, 2*time.Minute, "--endpoints", n.url, "--duration", "8s", "--fault-every", "3s",
		"--prefix", "tt/", "--fault-cmd", `echo "phase $LEASEHOLD_TORTURE_PHASE at $LEASEHOLD_ENDPOINTS"; exit 3`, "-o", "json")
	rep := parseTorture(t, stdout, stderr)
	if code != 0 || len(rep.Violations) > 0 {
		t.Errorf("torture exited %d with violations %v\nstderr: %s", code, rep.Violations, stderr)
	}
	if len(rep.FaultLog) == 0 {
		t.Fatalf("the fault command never ran:\n%s", stderr)
	}
	f := rep.FaultLog[0]
	if f.Class != "cmd" || f.Exit == nil || *f.Exit != 3 || !strings.Contains(f.Output, "phase 0 at "+n.url) {
		t.Errorf("fault log %+v, want the command's exit 3 and output", f)
	}
	if left := n.lhOK("kv", "list", "tt/").stdout; strings.Contains(left, "tt/") {
		t.Errorf("keys left under the prefix:\n%s", left)
	}
}

// TestTortureFlags: a bad flag is a usage error naming it.
func TestTortureFlags(t *testing.T) {
	for _, args := range [][]string{{"--local", "4"}, {"--faults", "pause"}, {"--local", "3", "--faults", "flood"}, {"--prefix", "x"}} {
		r := lhStdin(t, "", append([]string{"torture"}, args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, args[len(args)-2]) {
			t.Errorf("torture %v: %s; want exit 2 naming %s", args, r, args[len(args)-2])
		}
	}
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for s := bufio.NewScanner(f); s.Scan(); n++ {
	}
	return n
}
