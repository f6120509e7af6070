package leasehold_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/procs"
)

// A stand-in leasehold for the runner's own test: watch runs until
// interrupted and then ends with 0, as the real one does; stubborn
// ignores the interrupt; sore ends with 1.
const fakeLeasehold = `#!/bin/sh
case "$1" in
watch) trap 'echo interrupted; exit 0' INT; echo watching; while :; do sleep 0.1; done ;;
stubborn) trap '' INT; sleep 5 ;;
sore) trap 'exit 1' INT; while :; do sleep 0.1; done ;;
esac
`

// The runner judges blocks by their exit status, their marks and their
// JSON output comments, in one shell per document, without a node.
func TestDocsRunnerJudgesBlocks(t *testing.T) {
	fence := "```"
	md := strings.Join([]string{
		fence + "sh", `echo '{"ok":1,"state":"IDEM_STATE_STARTED"}'   # {"ok":1,"state":"IDEM_STATE_STARTED"}`, fence, // pass
		fence + "sh", `echo '{"state":"IDEM_STATE_COMPLETED"}'`, `# {"ok":1,"state":"IDEM_STATE_STARTED"}`, fence, // FAIL: no "ok"
		fence + "sh", "false", "echo after", fence, // FAIL: false
		"<!-- exit: 3 -->", fence + "sh", "sh -c 'exit 3'", fence, // pass
		"<!-- exit: 3 -->", fence + "sh", "true", fence, // FAIL: nothing failed
		"<!-- expect: hello -->", fence + "sh", "echo hello world", fence, // pass
		"<!-- expect: bye -->", fence + "sh", "echo hello world", fence, // FAIL
		"<!-- setup: false -->", fence + "sh", "true", fence, // FAIL: setup
		"<!-- setup: x=42 -->", fence + "sh", `[ "$x" = 42 ]`, "y=7", fence, // pass
		fence + "sh", `[ "$y" = 7 ]`, fence, // pass: the shell carries on
		fence + "sh", "sh -c 'exit 1", "'", fence, // FAIL: a command of two lines
		"<!-- not-run: a synopsis -->", fence + "sh", "false", fence, // skip
		"<!-- run-for: 1s -->", "<!-- expect: interrupted -->", fence + "sh", "leasehold watch", fence, // pass
		"<!-- run-for: 1s -->", fence + "sh", "leasehold stubborn", fence, // FAIL: killed
		"<!-- run-for: 1s -->", fence + "sh", "leasehold sore", fence, // FAIL: exit 1
		fence + "sh", `[ "$(type -t leasehold)" = file ]`, fence, // pass: run-for's bound is gone
		fence + "sh", "curl -s http://127.0.0.1:1/", fence, // FAIL: curl, as the block calls it
		"   <!-- expect: indented -->", "   " + fence + "sh", "   echo indented", "   " + fence, // pass
	}, "\n")
	exs, err := examples("x.md", md)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "leasehold"), []byte(fakeLeasehold), 0o755); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "doc")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	results := runDocument(t, exs, "127.0.0.1:1", work, procs.ChildEnv("PATH="+bin+":"+os.Getenv("PATH")))
	logExampleTable(t, results)
	want := []string{"pass", `FAIL no "ok"`, "FAIL line 1: false: exit 1", "pass failed as marked: line 1: sh -c 'exit 3': exit 3",
		"FAIL the exit mark wants one to exit 3", "pass", "FAIL no bye", "FAIL setup: line 1: false", "pass", "pass",
		"FAIL line 1: sh -c 'exit 1 ': exit 1", "skip a synopsis", "pass", "FAIL line 1: leasehold stubborn: exit 137", "FAIL line 1: leasehold sore: exit 1", "pass",
		"FAIL line 1: curl -s http://127.0.0.1:1/: exit 7", "pass"}
	if len(results) != len(want) {
		t.Fatalf("%d results, want %d", len(results), len(want))
	}
	for i, r := range results {
		status, words, _ := strings.Cut(want[i], " ")
		if r.status != status || !strings.Contains(r.detail, words) {
			t.Errorf("block %d (line %d): %s %q, want %q", i, r.line, r.status, r.detail, want[i])
		}
	}
	if r := results[12]; r.took < time.Second || r.took > 2500*time.Millisecond {
		t.Errorf("the run-for block took %v, not its 1s", r.took)
	}
	t.Logf("took %v", time.Since(began))
}
