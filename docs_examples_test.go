package leasehold_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/leasehold/leasehold/internal/freeport"
	"github.com/leasehold/leasehold/internal/procs"
)

// exampleTimeout bounds one block: an example that needs longer is marked
// not-run.
const exampleTimeout = 30 * time.Second

// The docs' address of the node, which the runner's node does not have.
var docAddrs = []string{"127.0.0.1:7420", "localhost:7420"}

// shellPrelude starts each document's bash: a failing command (or pipeline
// stage) fails its block, and curl fails on an HTTP error (a Connect
// error's status), with the body still shown.
const shellPrelude = `set -E -o pipefail
curl() { command curl --fail-with-body "$@"; }
`

// Every shell block of README.md and docs/*.md runs against a real node, in
// document order, one bash per document so its variables carry from block
// to block; a block marked <!-- not-run: reason --> is skipped with its
// reason. The table of blocks is logged (go test -v shows it).
func TestDocsExamplesRun(t *testing.T) {
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var docs [][]example
	for _, f := range append([]string{"README.md"}, files...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		exs, err := examples(f, string(b))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, exs)
	}

	dir := t.TempDir()
	binDir := filepath.Join(dir, "bin")
	if err := procs.BuildPackage(filepath.Join(binDir, "leasehold"), "./cmd/leasehold"); err != nil {
		t.Fatal(err)
	}
	addr := startExampleNode(t, filepath.Join(binDir, "leasehold"), dir)
	env := procs.ChildEnv("LEASEHOLD_ENDPOINTS=http://"+addr, "PATH="+binDir+":"+os.Getenv("PATH"))

	var results []exampleResult
	for i, exs := range docs {
		work := filepath.Join(dir, fmt.Sprintf("doc%d", i))
		if err := os.Mkdir(work, 0o755); err != nil {
			t.Fatal(err)
		}
		results = append(results, runDocument(t, exs, addr, work, env)...)
	}
	logExampleTable(t, results)
	for _, r := range results {
		if r.status == "FAIL" {
			t.Errorf("%s:%d: %s", r.file, r.line, r.detail)
		}
	}
}

func startExampleNode(t *testing.T, bin, dir string) string {
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	raft, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	p, err := procs.Start(t, dir, "node", procs.ChildEnv(), bin, "serve", "--data-dir", filepath.Join(dir, "data"),
		"--api-addr", addr, "--raft-addr", raft, "--log-level", "warn")
	if err != nil {
		t.Fatal(err)
	}
	if err := procs.WaitReady(p, "http://"+addr, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return addr
}

type exampleResult struct {
	file   string
	line   int
	status string // pass, FAIL or skip
	detail string // why it failed or was skipped
}

// runDocument runs a document's blocks in one bash, each with its output
// in a file of work, and reports each block as bash answers on its stdout
// "done N" and the first command that failed, if any.
func runDocument(t *testing.T, exs []example, addr, work string, env []string) []exampleResult {
	results := make([]exampleResult, len(exs))
	for i, ex := range exs {
		results[i] = exampleResult{file: ex.file, line: ex.line, status: "skip", detail: ex.skip}
	}
	sh := exec.Command("bash", "--noprofile", "--norc")
	sh.Dir, sh.Env = work, env
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // to end what a block left running
	stdin, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	sh.Stderr = io.Discard
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		syscall.Kill(-sh.Process.Pid, syscall.SIGKILL)
		sh.Wait()
	}()
	answers := make(chan string)
	go func() {
		defer close(answers)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			answers <- sc.Text()
		}
	}()
	io.WriteString(stdin, shellPrelude)
	for i, ex := range exs {
		if ex.skip != "" {
			continue
		}
		script := filepath.Join(work, fmt.Sprintf("block%d.sh", i))
		output := filepath.Join(work, fmt.Sprintf("block%d.out", i))
		text := ex.script
		for _, a := range docAddrs {
			text = strings.ReplaceAll(text, a, addr)
		}
		if err := os.WriteFile(script, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(stdin, "__failed=; trap ': \"${__failed:=line $LINENO: $BASH_COMMAND: exit $?}\"' ERR\n"+
			"source %q </dev/null >%q 2>&1\ntrap - ERR\necho \"done %d $__failed\"\n", script, output, i)
		r := &results[i]
		r.status, r.detail = "FAIL", ""
		shellGone := true
		select {
		case a, ok := <-answers:
			n, failed, _ := strings.Cut(strings.TrimPrefix(a, "done "), " ")
			switch {
			case !ok:
				r.detail = "the block ended the shell (exit?)"
			case n != strconv.Itoa(i):
				r.detail = "unexpected answer " + strconv.Quote(a)
			case failed != "":
				r.detail, shellGone = failed, false
			default:
				r.status, shellGone = "pass", false
			}
		case <-time.After(exampleTimeout):
			r.detail = fmt.Sprintf("still running after %v", exampleTimeout)
		}
		if r.status == "FAIL" {
			out, _ := os.ReadFile(output)
			r.detail += "\n  output: " + strings.ReplaceAll(procs.LastLines(string(out), 5), "\n", "\n  ")
		}
		if shellGone {
			markRestNotRun(results[i+1:], exs[i+1:], ex.line)
			return results
		}
	}
	return results
}

// markRestNotRun fails the blocks after one that timed out or ended the
// shell: the shell they would run in is gone.
func markRestNotRun(results []exampleResult, exs []example, line int) {
	for i := range results {
		if exs[i].skip == "" {
			results[i].status = "FAIL"
			results[i].detail = fmt.Sprintf("not run: the shell ended at the block of line %d", line)
		}
	}
}

func logExampleTable(t *testing.T, results []exampleResult) {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "file\tline\tstatus\treason")
	counts := map[string]map[string]int{}
	var files []string
	for _, r := range results {
		first, _, _ := strings.Cut(r.detail, "\n")
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", r.file, r.line, r.status, first)
		if counts[r.file] == nil {
			counts[r.file] = map[string]int{}
			files = append(files, r.file)
		}
		counts[r.file][r.status]++
	}
	w.Flush()
	b.WriteString("\n")
	for _, f := range files {
		c := counts[f]
		fmt.Fprintf(&b, "%s: %d blocks, %d run, %d passed, %d failed, %d skipped\n",
			f, c["pass"]+c["FAIL"]+c["skip"], c["pass"]+c["FAIL"], c["pass"], c["FAIL"], c["skip"])
	}
	t.Log("\n" + b.String())
}
