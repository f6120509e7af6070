package leasehold_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
// A failure inside the runner's curl and leasehold wrappers is reported
// as the block's call of them (__command).
const shellPrelude = `set -E -o pipefail
__command() {
  case $BASH_COMMAND in
  "command curl --fail-with-body"* | "timeout --preserve-status"* | 'return $s') echo "$__call" ;;
  *) echo "$BASH_COMMAND" ;;
  esac
}
` + curlWrapper

const curlWrapper = `curl() { __call="curl $*"; command curl --fail-with-body "$@"; }
`

// Every shell block of README.md and docs/*.md runs against a real node, in
// document order, one bash per document so its variables carry from block
// to block; a block marked <!-- not-run: reason --> is skipped with its
// reason. The table of blocks is logged (go test -v shows it), and with
// DOCS_EXAMPLES_OUTPUT=1 what each block printed. The marks that say how a
// block runs are listed at examples.
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

	// The examples use curl and jq, as the README says; CI installs both.
	for _, tool := range []string{"curl", "jq", "timeout"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("the docs' examples need %s: %v", tool, err)
			}
			t.Skipf("the docs' examples need %s: %v", tool, err)
		}
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
	took   time.Duration
}

// The programs the docs' examples run under leasehold (elect, groups run)
// are stand-ins in each document's directory: each prints what leasehold
// gave it and runs until interrupted.
var standIns = []string{"scheduler", "billing-writer", "consume-partition"}

const standIn = `#!/bin/sh
echo "$(basename "$0"): running with token ${LEASEHOLD_TOKEN:-none}${LEASEHOLD_PARTITION:+, partition $LEASEHOLD_PARTITION}"
trap 'exit 0' INT TERM
sleep 60 & wait
`

// runDocument runs a document's blocks in one bash, each with its output
// in a file of work, and reports each block as bash answers on its stdout
// "done N STATUS FAILED": the status and the command of the first command
// that failed, if any (as the block has it: a failure inside the runner's
// curl and leasehold wrappers is reported where the block called them).
func runDocument(t *testing.T, exs []example, addr, work string, env []string) []exampleResult {
	results := make([]exampleResult, len(exs))
	for i, ex := range exs {
		results[i] = exampleResult{file: ex.file, line: ex.line, status: "skip", detail: ex.skip}
	}
	for _, name := range standIns {
		if err := os.WriteFile(filepath.Join(work, name), []byte(standIn), 0o755); err != nil {
			t.Fatal(err)
		}
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
		setup := filepath.Join(work, fmt.Sprintf("block%d.setup.sh", i))
		for name, text := range map[string]string{script: ex.script, setup: ex.setup} {
			for _, a := range docAddrs {
				text = strings.ReplaceAll(text, a, addr)
			}
			if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		bound, unbound := "", ""
		if ex.runFor > 0 {
			// Each leasehold and curl command is interrupted as by Ctrl-C
			// after runFor, and killed 2s later if it has not ended (137).
			// It must end with 0 or by the signal (130): a race-built
			// leasehold on a loaded machine can take over a second to
			// reach main, where it starts to catch SIGINT, and ends by
			// the signal before (the e2e tests check the 0 of watch, elect
			// --observe, renew --keep-alive and groups run once running).
			wrap := "() { __call=\"%[1]s $*\"; local s=0; timeout --preserve-status -s INT -k 2s %[2]s %[1]s%[3]s \"$@\" || s=$?; [ $s = 130 ] && s=0; return $s; }\n"
			d := fmt.Sprintf("%gs", ex.runFor.Seconds())
			bound = fmt.Sprintf("leasehold"+wrap, "leasehold", d, "") + fmt.Sprintf("curl"+wrap, "curl", d, " --fail-with-body")
			unbound = "unset -f leasehold\n" + curlWrapper
		}
		fmt.Fprintf(stdin, "__failed= __status=0\n"+
			"trap '__s=$?; case ${FUNCNAME[0]-} in leasehold|curl) ;; *) [ -n \"$__failed\" ] || __failed=\"line $LINENO: $(__command)\" __status=$__s;; esac' ERR\n"+
			"source %q </dev/null >%q.out 2>&1\n"+
			"if [ -n \"$__failed\" ]; then __failed=\"setup: $__failed\"; else\n%s"+
			"source %q </dev/null >%q 2>&1\n%sfi\n"+
			"trap - ERR\necho \"done %d $__status ${__failed//$'\\n'/ }\"\n",
			setup, setup, bound, script, output, unbound, i)
		r := &results[i]
		r.status, r.detail = "FAIL", ""
		shellGone := true
		began := time.Now()
		select {
		case a, ok := <-answers:
			fields := strings.SplitN(strings.TrimPrefix(a, "done "), " ", 3)
			switch {
			case !ok:
				r.detail = "the block ended the shell (exit?)"
			case len(fields) != 3 || fields[0] != strconv.Itoa(i):
				r.detail = "unexpected answer " + strconv.Quote(a)
			default:
				shellGone = false
				r.status, r.detail = judge(ex, output, fields[1], fields[2])
			}
		case <-time.After(exampleTimeout):
			r.detail = fmt.Sprintf("still running after %v", exampleTimeout)
		}
		r.took = time.Since(began)
		if os.Getenv("DOCS_EXAMPLES_OUTPUT") != "" { // to read what each block printed
			o, _ := os.ReadFile(output)
			t.Logf("%s:%d output:\n%s", ex.file, ex.line, o)
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

// judge says whether a block that ran passed: its exit status (the first
// failing command's, 0 if none) is its exit mark's, its output contains
// each expect mark's text, and shows each JSON key and enum value its
// output comments show.
func judge(ex example, output, status, failed string) (string, string) {
	if status != strconv.Itoa(ex.exit) {
		if ex.exit == 0 || strings.HasPrefix(failed, "setup: ") {
			return "FAIL", failed + ": exit " + status
		}
		if failed == "" {
			return "FAIL", fmt.Sprintf("every command succeeded; the exit mark wants one to exit %d", ex.exit)
		}
		return "FAIL", fmt.Sprintf("%s: exit %s (the exit mark wants %d)", failed, status, ex.exit)
	}
	b, err := os.ReadFile(output)
	if err != nil {
		return "FAIL", err.Error()
	}
	out := string(b)
	for _, want := range append(ex.expect, shownOutput(ex.script)...) {
		if !strings.Contains(out, want) {
			return "FAIL", fmt.Sprintf("the output has no %s, which the block shows", want)
		}
	}
	detail := ""
	if ex.exit != 0 {
		detail = "failed as marked: " + failed + ": exit " + status
	}
	return "pass", detail
}

var (
	shownKeyRE     = regexp.MustCompile(`"([A-Za-z_][A-Za-z_0-9]*)":`)
	shownCommentRE = regexp.MustCompile(`(?:^|\s)# (\{.*)`)
	shownEnumRE    = regexp.MustCompile(`"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+"`)
)

// shownOutput is what a block's output comments show of the output: a
// comment that is a JSON object ("# {...", on its own line or after a
// command) shows its keys, as "key", and
// its enum values ("IDEM_STATE_STARTED"); values in general (ids, times,
// secrets) vary from run to run and are not compared.
func shownOutput(script string) []string {
	var shown []string
	for _, l := range strings.Split(script, "\n") {
		m := shownCommentRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		c := m[1]
		for _, m := range shownKeyRE.FindAllStringSubmatch(c, -1) {
			shown = append(shown, strconv.Quote(m[1]))
		}
		shown = append(shown, shownEnumRE.FindAllString(c, -1)...)
	}
	return shown
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
	fmt.Fprintln(w, "file\tline\tstatus\ttime\treason")
	counts := map[string]map[string]int{"all": {}}
	var files []string
	var took time.Duration
	for _, r := range results {
		took += r.took
		counts["all"][r.status]++
		first, _, _ := strings.Cut(r.detail, "\n")
		took := ""
		if r.status != "skip" {
			took = r.took.Round(10 * time.Millisecond).String()
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\n", r.file, r.line, r.status, took, first)
		if counts[r.file] == nil {
			counts[r.file] = map[string]int{}
			files = append(files, r.file)
		}
		counts[r.file][r.status]++
	}
	w.Flush()
	b.WriteString("\n")
	for _, f := range append(files, "all") {
		c := counts[f]
		fmt.Fprintf(&b, "%s: %d blocks, %d run, %d passed, %d failed, %d skipped\n",
			f, c["pass"]+c["FAIL"]+c["skip"], c["pass"]+c["FAIL"], c["pass"], c["FAIL"], c["skip"])
	}
	fmt.Fprintf(&b, "the blocks that ran took %v\n", took.Round(100*time.Millisecond))
	t.Log("\n" + b.String())
}
