package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/internal/testutil"
)

// The payments API under faults, with real worker processes, a real
// leasehold node and a real Postgres: whatever happens to a worker, each
// payment key is charged exactly once, and every answer for a key is the
// same receipt.

var (
	workerBin string
	pg        *pgtest.Server
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "payments-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	built := make(chan error, 1)
	go func() { built <- build(filepath.Join(dir, "payments")) }()
	var stop func()
	pg, stop = pgtest.StartMain()
	code := 1
	if err := <-built; err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		workerBin = filepath.Join(dir, "payments")
		code = m.Run()
	}
	stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

func build(out string) error {
	args := []string{"build", "-o", out}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" && s.Value == "true" {
				args = append(args, "-race")
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if b, err := exec.CommandContext(ctx, "go", append(args, ".")...).CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, b)
	}
	return nil
}

type worker struct {
	name, url string
	cmd       *exec.Cmd
	stderr    bytes.Buffer
	done      chan struct{}
}

// env is one leasehold node and one database for a test.
type env struct {
	t         *testing.T
	endpoint  string
	dsn       string
	attemptTT time.Duration
}

func newEnv(t *testing.T) *env {
	if pg.Err() != nil {
		t.Skipf("no Postgres: %v", pg.Err())
	}
	n := testcluster.StartNode(t, "")
	return &env{t: t, endpoint: n.URL, dsn: pg.NewDatabase(t), attemptTT: 2 * time.Second}
}

func (e *env) start(name string, args ...string) *worker {
	t := e.t
	t.Helper()
	addr := testutil.FreeAddr(t)
	w := &worker{name: name, url: "http://" + addr, done: make(chan struct{})}
	w.cmd = exec.Command(workerBin, append([]string{"--name", name, "--listen", addr, "--dsn", e.dsn,
		"--endpoints", e.endpoint, "--attempt-ttl", e.attemptTT.String()}, args...)...)
	w.cmd.Stderr = &w.stderr
	w.cmd.WaitDelay = 5 * time.Second
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		w.cmd.Process.Signal(syscall.SIGCONT)
		w.cmd.Process.Kill()
		<-w.done
		if t.Failed() {
			t.Logf("worker %s stderr:\n%s", name, w.stderr.String())
		}
	})
	testutil.Eventually(t, 30*time.Second, "worker "+name+" listens", func() bool {
		res, err := http.Get(w.url + "/")
		if err == nil {
			res.Body.Close()
		}
		return err == nil
	})
	return w
}

// answer is one response the client got.
type answer struct {
	status int
	body   string
}

// pay sends one payment with key to url, with a per-try timeout.
func pay(url, key, body string, timeout time.Duration) (answer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/payments", strings.NewReader(body))
	req.Header.Set("Idempotency-Key", `"`+key+`"`)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return answer{res.StatusCode, string(b)}, nil
}

// payUntilDone retries key against the workers in turn until a 201 comes
// back (a 409 or a failed connection is retried), bounded by a deadline.
func payUntilDone(t *testing.T, urls []string, key, body string) answer {
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; ; i++ {
		a, err := pay(urls[i%len(urls)], key, body, 3*time.Second)
		if err == nil && a.status == http.StatusCreated {
			return a
		}
		if err == nil && a.status != http.StatusConflict && a.status != http.StatusServiceUnavailable {
			t.Errorf("%s: unexpected answer %d %s", key, a.status, a.body)
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no answer before the deadline (last %v %v)", key, a, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// charges counts the payments rows per key.
func (e *env) charges() map[string]int {
	ctx := testutil.Context(e.t, 10*time.Second)
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT idem_key, count(*) FROM payments GROUP BY idem_key")
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			e.t.Fatal(err)
		}
		out[k] = n
	}
	return out
}

func receiptOf(t *testing.T, a answer) map[string]any {
	var r map[string]any
	if err := json.Unmarshal([]byte(a.body), &r); err != nil {
		t.Fatalf("not a receipt: %s", a.body)
	}
	return r
}

// Eight clients retry the same keys at once against two workers: one
// charge per key, one receipt for everyone.
func TestConcurrentRetriesChargeOnce(t *testing.T) {
	e := newEnv(t)
	a, b := e.start("a"), e.start("b")
	urls := []string{a.url, b.url}
	for k := range 3 {
		key := fmt.Sprintf("pay-%d", k)
		answers := make([]answer, 8)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Go(func() { answers[i] = payUntilDone(t, urls[i%2:], key, `{"account":"acct-1","amount":10}`) })
		}
		wg.Wait()
		for i := range answers {
			if answers[i].body != answers[0].body {
				t.Fatalf("%s: client %d got %s, client 0 got %s", key, i, answers[i].body, answers[0].body)
			}
		}
		// The key reused with another payload is never answered with it.
		other, err := pay(a.url, key, `{"account":"acct-1","amount":99}`, 5*time.Second)
		if err != nil || other.status != http.StatusUnprocessableEntity {
			t.Fatalf("%s with another payload: %v %v", key, other, err)
		}
	}
	for k, n := range e.charges() {
		if n != 1 {
			t.Fatalf("%s charged %d times", k, n)
		}
	}
}

// A worker SIGSTOPped mid-request past its attempt TTL, then resumed: a
// retry on the other worker takes over and charges; the resumed worker's
// fenced write is refused, so the key is charged once.
func TestPausedWorkerPastItsAttemptChargesNothing(t *testing.T) {
	e := newEnv(t)
	slow := e.start("slow", "--pause-before-write", "1500ms")
	fast := e.start("fast")
	first := make(chan answer, 1)
	go func() {
		a, _ := pay(slow.url, "pay-stop", `{"account":"acct-2","amount":5}`, 60*time.Second)
		first <- a
	}()
	time.Sleep(500 * time.Millisecond) // the slow worker has begun and sleeps before its write
	slow.cmd.Process.Signal(syscall.SIGSTOP)
	got := payUntilDone(t, []string{fast.url}, "pay-stop", `{"account":"acct-2","amount":5}`)
	if r := receiptOf(t, got); r["worker"] != "fast" {
		t.Fatalf("the retry's receipt: %v", r)
	}
	slow.cmd.Process.Signal(syscall.SIGCONT)
	late := <-first
	if late.status == http.StatusCreated {
		t.Fatalf("the paused worker answered %d %s after its attempt was taken over", late.status, late.body)
	}
	if n := e.charges()["pay-stop"]; n != 1 {
		t.Fatalf("charged %d times", n)
	}
	if again := payUntilDone(t, []string{slow.url, fast.url}, "pay-stop", `{"account":"acct-2","amount":5}`); again.body != got.body {
		t.Fatalf("a later retry got %s, want %s", again.body, got.body)
	}
}

// A worker SIGKILLed (here: exiting) after its charge committed but
// before its result was stored: the attempt lapses, a retry runs again,
// finds the charge and answers with it. One charge, one receipt.
func TestWorkerKilledAfterTheEffectChargesOnce(t *testing.T) {
	e := newEnv(t)
	dies := e.start("dies", "--exit-after-write")
	ok := e.start("ok")
	if _, err := pay(dies.url, "pay-kill", `{"account":"acct-3","amount":7}`, 10*time.Second); err == nil {
		t.Fatal("the dying worker answered")
	}
	got := payUntilDone(t, []string{ok.url}, "pay-kill", `{"account":"acct-3","amount":7}`)
	if r := receiptOf(t, got); r["worker"] != "dies" {
		t.Fatalf("the retry charged again instead of finding the charge: %v", r)
	}
	if n := e.charges()["pay-kill"]; n != 1 {
		t.Fatalf("charged %d times", n)
	}
	if again, _ := pay(ok.url, "pay-kill", `{"account":"acct-3","amount":7}`, 5*time.Second); again.body != got.body {
		t.Fatalf("replay %s, want %s", again.body, got.body)
	}
}

// The leader of a 3-node leasehold cluster is killed while 8 clients pay
// with the same keys through two workers: the workers fail over to the
// new leader, and each key is still charged once and answered alike.
func TestLeaderKillChargesOnce(t *testing.T) {
	if pg.Err() != nil {
		t.Skipf("no Postgres: %v", pg.Err())
	}
	c := testcluster.Start(t, 3)
	old := c.WaitLeader(30 * time.Second)
	e := &env{t: t, endpoint: strings.Join(c.URLs(), ","), dsn: pg.NewDatabase(t), attemptTT: 2 * time.Second}
	a, b := e.start("a"), e.start("b")
	urls := []string{a.url, b.url}
	keys := []string{"lk-1", "lk-2", "lk-3", "lk-4"}
	answers := make([][]answer, len(keys))
	var wg sync.WaitGroup
	for k, key := range keys {
		answers[k] = make([]answer, 8)
		for i := range 8 {
			wg.Go(func() {
				time.Sleep(time.Duration(i*k) * 50 * time.Millisecond) // spread over the kill
				answers[k][i] = payUntilDone(t, urls[i%2:], key, `{"account":"acct-4","amount":3}`)
			})
		}
	}
	time.Sleep(300 * time.Millisecond)
	c.Kill(old)
	c.WaitNewLeader(old, 30*time.Second)
	wg.Wait()
	for k, key := range keys {
		for i := range answers[k] {
			if answers[k][i].body != answers[k][0].body {
				t.Fatalf("%s: client %d got %s, client 0 got %s", key, i, answers[k][i].body, answers[k][0].body)
			}
		}
	}
	charges := e.charges()
	for _, key := range keys {
		if charges[key] != 1 {
			t.Fatalf("%s charged %d times", key, charges[key])
		}
	}
}
