package conformance

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/fence/httpfence"
	"github.com/leasehold/leasehold/internal/procs"
	"github.com/leasehold/leasehold/internal/testutil"
)

// runTimeout bounds one driver run of one scenario.
const runTimeout = 60 * time.Second

var (
	lhBin, goDriver string
	// Set by TestMain: why a client cannot run here ("" if it can).
	missing = map[string]string{}
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	// LEASEHOLD_BIN: a leasehold binary built already (scripts/test's).
	lhBin = os.Getenv("LEASEHOLD_BIN")
	if lhBin == "" {
		bin, remove, err := procs.Build("leasehold-conformance-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "conformance:", err)
			return 2
		}
		defer remove()
		lhBin = bin
	}
	dir, err := os.MkdirTemp("", "leasehold-conformance-drivers-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		return 2
	}
	defer os.RemoveAll(dir)
	goDriver = filepath.Join(dir, "go-driver")
	if err := procs.BuildPackage(goDriver, "./drivers/go"); err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		return 2
	}
	missing["typescript"] = buildTypeScript()
	if _, err := exec.LookPath("python3"); err != nil {
		missing["python"] = "python3 is not on PATH"
	}
	return m.Run()
}

// buildTypeScript compiles the TypeScript client (its driver imports the
// compiled code), or says why it cannot.
func buildTypeScript() string {
	if _, err := exec.LookPath("node"); err != nil {
		return "node is not on PATH"
	}
	dir := filepath.Join("..", "clients", "typescript")
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		return "clients/typescript has no node_modules (run npm ci there)"
	}
	if !stale(filepath.Join(dir, "dist", "src", "index.js"), filepath.Join(dir, "src")) {
		return "" // npm test has just compiled it
	}
	if b, err := exec.Command(filepath.Join(dir, "node_modules", ".bin", "tsc"), "-p", dir).CombinedOutput(); err != nil {
		return fmt.Sprintf("tsc: %v\n%s", err, b)
	}
	return ""
}

// stale says whether out is missing or older than a file under src.
func stale(out, src string) bool {
	o, err := os.Stat(out)
	if err != nil {
		return true
	}
	newer := errors.New("newer")
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if info, err := d.Info(); err != nil || info.ModTime().After(o.ModTime()) {
			return newer
		}
		return nil
	}) != nil
}

// scenario is one file of scenarios/: the steps are the drivers' business;
// the suite reads what it acts on.
type scenario struct {
	file  string
	Title string
	Proxy *struct {
		DropFirstReply []string `json:"drop_first_reply"`
	}
	ExpectDropped [][]string `json:"expect_dropped"`
}

func loadScenarios(t *testing.T) []scenario {
	files, err := filepath.Glob("scenarios/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	sort.Strings(files)
	var out []scenario
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := scenario{file: f}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, s)
	}
	return out
}

// driverCmd is how each client's driver runs a scenario file.
var drivers = []struct {
	name string
	cmd  func(file string) []string
}{
	{"go", func(f string) []string { return []string{goDriver, f} }},
	{"typescript", func(f string) []string { return []string{"node", "drivers/typescript/driver.mjs", f} }},
	{"python", func(f string) []string { return []string{"python3", "drivers/python/driver.py", f} }},
}

// TestConformance runs every scenario with every client's driver against
// one real `leasehold serve` node, and reports the scenario × client
// table. A client whose runtime is missing fails the suite under CI=true
// and is skipped (loudly) otherwise.
func TestConformance(t *testing.T) {
	node := startNode(t)
	admin, err := client.New(client.Config{Endpoints: []string{node}, Session: client.SessionOff})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	fence := httptest.NewServer(httpfence.Middleware(&httpfence.MemoryStore{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	t.Cleanup(fence.Close)
	scenarios := loadScenarios(t)

	var mu sync.Mutex
	table := map[string]map[string]string{} // scenario title -> client -> result
	record := func(title, client, result string) {
		mu.Lock()
		defer mu.Unlock()
		if table[title] == nil {
			table[title] = map[string]string{}
		}
		table[title][client] = result
	}
	t.Run("clients", func(t *testing.T) {
		for _, d := range drivers {
			t.Run(d.name, func(t *testing.T) {
				t.Parallel()
				if why := missing[d.name]; why != "" {
					for _, s := range scenarios {
						record(s.Title, d.name, "missing runtime")
					}
					if os.Getenv("CI") == "true" {
						t.Fatalf("%s cannot run: %s", d.name, why)
					}
					t.Skipf("SKIPPED (fails under CI=true): %s cannot run: %s", d.name, why)
				}
				for i, s := range scenarios {
					t.Run(strings.TrimSuffix(filepath.Base(s.file), ".json"), func(t *testing.T) {
						r := &run{t: t, admin: admin, scenario: s}
						ok := r.do(d.cmd(s.file), node, fmt.Sprintf("%s/%d/", d.name, i), fence.URL)
						res := "pass"
						if !ok {
							res = "FAIL"
						}
						record(s.Title, d.name, res)
					})
				}
			})
		}
	})
	t.Log("\n" + formatTable(scenarios, table))
}

func formatTable(scenarios []scenario, table map[string]map[string]string) string {
	var b strings.Builder
	b.WriteString("| scenario | go | typescript | python |\n|---|---|---|---|\n")
	for _, s := range scenarios {
		fmt.Fprintf(&b, "| %s |", s.Title)
		for _, d := range drivers {
			r := table[s.Title][d.name]
			if r == "" {
				r = "not run"
			}
			fmt.Fprintf(&b, " %s |", r)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// startNode starts `leasehold serve` on free loopback ports and waits
// until it is ready.
func startNode(t *testing.T) string {
	dir := t.TempDir()
	for attempt := 1; ; attempt++ {
		api, raft := testutil.FreeAddr(t), testutil.FreeAddr(t)
		p, err := procs.Start(t, dir, fmt.Sprintf("serve-%d", attempt), procs.ChildEnv(), lhBin,
			"serve", "--data-dir", filepath.Join(dir, fmt.Sprintf("data-%d", attempt)), "--api-addr", api, "--raft-addr", raft)
		if err != nil {
			t.Fatal(err)
		}
		url := "http://" + api
		err = procs.WaitReady(p, url, 30*time.Second)
		if err == nil {
			return url
		}
		if attempt == 3 || !strings.Contains(p.Stderr(), "address already in use") {
			t.Fatal(err)
		}
	}
}

// run is one driver process running one scenario.
type run struct {
	t        *testing.T
	admin    *client.Client
	scenario scenario
	cmd      *exec.Cmd
	stdin    io.WriteCloser

	mu    sync.Mutex
	lines []map[string]any
	more  chan struct{}
	eof   bool

	emitted map[string]any // the last "emit" line: a lease's id and resource
	resumed int            // lines[resumed:] came after a pause ended (-1: none)
}

// do runs the driver and checks what it reports; false if the scenario failed.
func (r *run) do(argv []string, node, prefix, fenceURL string) bool {
	t := r.t
	endpoint := node
	var proxy *dropProxy
	if r.scenario.Proxy != nil {
		proxy, endpoint = startDropProxy(t, node, r.scenario.Proxy.DropFirstReply)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	r.cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
	r.cmd.Env = procs.ChildEnv("LEASEHOLD_ENDPOINT="+endpoint, "LEASEHOLD_PREFIX="+prefix, "LEASEHOLD_FENCE_URL="+fenceURL)
	var stderr strings.Builder
	r.cmd.Stderr = &stderr
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if r.stdin, err = r.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	r.more, r.resumed = make(chan struct{}, 1), -1
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		syscall.Kill(r.cmd.Process.Pid, syscall.SIGCONT) // never leave it stopped
	}()
	go r.read(out)
	done := false
	for i := 0; ; i++ {
		line, ok := r.next(i)
		if !ok {
			break
		}
		switch {
		case line["done"] == true:
			done = true
		case line["ok"] == false:
			t.Errorf("step %v (%v) failed: %v", line["step"], line["op"], line["error"])
		case line["lease"] != nil && line["id"] != nil:
			r.emitted = line
		case line["sync"] != nil:
			if err := r.sync(line["sync"].(string)); err != nil {
				t.Errorf("sync %v: %v", line["sync"], err)
			}
		}
	}
	err = r.cmd.Wait()
	if err != nil || !done {
		t.Errorf("driver %v: exit %v, finished: %v\nstderr:\n%s", argv, err, done, stderr.String())
	}
	if proxy != nil {
		for _, group := range r.scenario.ExpectDropped {
			if !proxy.droppedAny(group) {
				t.Errorf("the proxy dropped no answer of %v: the scenario did not test a lost reply", group)
			}
		}
	}
	r.checkPause()
	return !t.Failed()
}

func (r *run) read(out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			m = map[string]any{"ok": false, "error": "not a JSON line: " + sc.Text()}
		}
		r.mu.Lock()
		r.lines = append(r.lines, m)
		r.mu.Unlock()
		r.poke()
	}
	r.mu.Lock()
	r.eof = true
	r.mu.Unlock()
	r.poke()
}

func (r *run) poke() {
	select {
	case r.more <- struct{}{}:
	default:
	}
}

// next waits for line i; false once the driver's output ended.
func (r *run) next(i int) (map[string]any, bool) {
	for {
		r.mu.Lock()
		if i < len(r.lines) {
			l := r.lines[i]
			r.mu.Unlock()
			return l, true
		}
		eof := r.eof
		r.mu.Unlock()
		if eof {
			return nil, false
		}
		<-r.more
	}
}

// sync does what the scenario asks of the suite at a sync point.
func (r *run) sync(name string) error {
	switch name {
	case "pause":
		return r.pause()
	case "force_release":
		if err := r.forceRelease(); err != nil {
			return err
		}
		_, err := io.WriteString(r.stdin, "ok\n")
		return err
	}
	return fmt.Errorf("unknown sync point %q", name)
}

func (r *run) emittedLease() (resource string, id uint64, err error) {
	if r.emitted == nil {
		return "", 0, errors.New("the driver emitted no lease")
	}
	return r.emitted["resource"].(string), uint64(r.emitted["id"].(float64)), nil
}

func (r *run) forceRelease() error {
	resource, id, err := r.emittedLease()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = r.admin.ForceRelease(ctx, resource, id, "conformance: a forced release")
	return err
}

// pause stops the driver (SIGSTOP) until the node has expired its lease,
// then resumes it (SIGCONT); checkPause then reads what it did after.
func (r *run) pause() error {
	resource, id, err := r.emittedLease()
	if err != nil {
		return err
	}
	pid := r.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return err
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	end := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		info, err := r.admin.Get(ctx, resource)
		cancel()
		if err == nil && (info.Holder == nil || info.Holder.ID != id) {
			break // the node has expired the lease
		}
		if time.Now().After(end) {
			return fmt.Errorf("the node did not expire lease %d of %s while its holder was stopped (last error %v)", id, resource, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Whatever the driver wrote before it stopped has been read by now.
	time.Sleep(100 * time.Millisecond)
	r.mu.Lock()
	r.resumed = len(r.lines)
	r.mu.Unlock()
	return nil
}

// checkPause checks that after a pause past the node's expiry, the holder
// did no work: its first word was the loss.
func (r *run) checkPause() {
	if r.resumed < 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines[r.resumed:] {
		switch l["event"] {
		case "work":
			r.t.Errorf("the holder worked after resuming, though the node had expired its lease while it was stopped")
			return
		case "lost":
			return
		}
	}
	r.t.Errorf("the holder never reported its lease lost after resuming")
}
