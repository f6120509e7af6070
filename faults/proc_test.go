package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
)

const (
	readyTimeout = 60 * time.Second // a serve process answers /readyz 200 (roomy: 2 shared cores)
	exitTimeout  = 10 * time.Second // a killed process is reaped
)

// checkFor polls f every 50ms until it returns nil, and returns f's last
// error if that takes longer than timeout.
func checkFor(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still failing after %v: %w", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freeAddr is for child processes, which are given addresses, not listeners.
var freeAddr = testutil.FreeAddr

// childEnv is the test's environment without LEASEHOLD_ variables from the
// caller's shell and without the race runtime's 1s sleep at exit.
func childEnv(extra ...string) []string {
	var env []string
	gorace := "atexit_sleep_ms=0"
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "LEASEHOLD_"):
		case strings.HasPrefix(kv, "GORACE="):
			gorace = strings.TrimPrefix(kv, "GORACE=") + " " + gorace
		default:
			env = append(env, kv)
		}
	}
	return append(append(env, "GORACE="+gorace), extra...)
}

// proc is a child process whose output goes to files.
type proc struct {
	name    string
	cmd     *exec.Cmd
	outPath string
	errPath string
	done    chan struct{} // closed once reaped
	err     error         // Wait's error, valid after done
}

// startProc starts bin with args; it is SIGKILLed (after a SIGCONT, in case
// it was stopped) when the test ends. It returns errors rather than fail t,
// so that a subtest may start a process its parent test owns.
func startProc(t testing.TB, dir, name string, env []string, bin string, args ...string) (*proc, error) {
	p := &proc{name: name, outPath: filepath.Join(dir, name+".stdout"), errPath: filepath.Join(dir, name+".stderr"),
		done: make(chan struct{})}
	stdout, err := os.Create(p.outPath)
	if err != nil {
		return nil, err
	}
	defer stdout.Close()
	stderr, err := os.Create(p.errPath)
	if err != nil {
		return nil, err
	}
	defer stderr.Close()
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr, p.cmd.Env = stdout, stderr, env
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		for _, path := range []string{p.outPath, p.errPath} {
			if b, _ := os.ReadFile(path); bytes.Contains(b, []byte("WARNING: DATA RACE")) {
				t.Errorf("%s reported a data race:\n%s", name, b)
			}
		}
	})
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) signal(sig syscall.Signal) error {
	if p.exited() {
		return fmt.Errorf("%s already exited: %v", p.name, p.err)
	}
	return p.cmd.Process.Signal(sig)
}

// kill SIGKILLs the process (waking it first, if stopped) and reaps it.
func (p *proc) kill() error {
	if p.exited() {
		return nil
	}
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.cmd.Process.Kill()
	select {
	case <-p.done:
		return nil
	case <-time.After(exitTimeout):
		return fmt.Errorf("%s (pid %d) not reaped %v after SIGKILL", p.name, p.cmd.Process.Pid, exitTimeout)
	}
}

func (p *proc) stdout() string { b, _ := os.ReadFile(p.outPath); return string(b) }
func (p *proc) stderr() string { b, _ := os.ReadFile(p.errPath); return string(b) }

// node is a `leasehold serve` process with a fixed data dir and ports
// across restarts.
type node struct {
	t        testing.TB
	id       string
	dir      string
	dataDir  string
	apiAddr  string
	raftAddr string
	url      string
	args     []string // extra serve flags
	starts   int
	p        *proc
}

func newNode(t testing.TB, id, dataDir string, args ...string) *node {
	t.Helper()
	dir := t.TempDir()
	if dataDir == "" {
		dataDir = filepath.Join(dir, "data")
	}
	n := &node{t: t, id: id, dir: dir, dataDir: dataDir, apiAddr: freeAddr(t), raftAddr: freeAddr(t), args: args}
	n.url = "http://" + n.apiAddr
	return n
}

// launch starts serve without waiting for it to be ready.
func (n *node) launch() error {
	n.starts++
	p, err := startProc(n.t, n.dir, fmt.Sprintf("%s-serve-%d", n.id, n.starts), childEnv(), lhBin,
		append([]string{"serve", "--node-id", n.id, "--data-dir", n.dataDir, "--api-addr", n.apiAddr,
			"--raft-addr", n.raftAddr, "--log-level", "warn"}, n.args...)...)
	if err != nil {
		return err
	}
	n.p = p
	return nil
}

// start launches serve and waits until it is ready; the error says why not
// (serve exited first, with its stderr, or never became ready).
func (n *node) start() error {
	if err := n.launch(); err != nil {
		return err
	}
	return n.waitReady(readyTimeout)
}

var probe = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

func (n *node) waitReady(timeout time.Duration) error {
	p := n.p
	var exitErr error
	err := checkFor(timeout, func() error {
		if p.exited() {
			exitErr = fmt.Errorf("%s exited before it was ready (%v): %s", p.name, p.err, why(p.stderr()))
			return nil
		}
		resp, err := probe.Get(n.url + "/readyz")
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %s: %s", resp.Status, b)
		}
		return nil
	})
	if exitErr != nil {
		return exitErr
	}
	return err
}

// why picks from a dead process's stderr the line that says why: a panic,
// or else its last lines.
func why(stderr string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
			return l
		}
	}
	return lastLines(stderr, 3)
}

// lastLines is the end of a log, enough to name an error.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// startCluster starts a cluster of size nodes (bootstrapped from a peer
// list) and waits until every node is ready.
func startCluster(t testing.TB, size int, args ...string) []*node {
	t.Helper()
	nodes := make([]*node, size)
	var peers []string
	for i := range nodes {
		nodes[i] = newNode(t, fmt.Sprintf("n%d", i+1), "", args...)
		peers = append(peers, nodes[i].id+"="+nodes[i].raftAddr)
	}
	for _, n := range nodes {
		n.args = append(n.args, "--peers", strings.Join(peers, ","))
		if err := n.launch(); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		if err := n.waitReady(readyTimeout); err != nil {
			t.Fatal(err)
		}
	}
	return nodes
}

func urls(nodes []*node) []string {
	var u []string
	for _, n := range nodes {
		u = append(u, n.url)
	}
	return u
}

// runLH runs a leasehold CLI command to completion (bounded by timeout).
func runLH(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, lhBin, args...)
	cmd.Env = childEnv()
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && ctx.Err() == nil {
		return string(out), err
	}
	if ctx.Err() != nil {
		return string(out), fmt.Errorf("leasehold %s: did not finish within %v", strings.Join(args, " "), timeout)
	}
	if err != nil {
		return string(out), fmt.Errorf("leasehold %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
