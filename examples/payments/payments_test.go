package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/procs"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/internal/testutil"
)

// The payments API under faults, with real worker processes, a real
// leasehold node and a real Postgres: whatever happens to a worker, each
// payment key is charged exactly once, and every answer for a key is the
// same receipt.

var (
	workerBin    string
	leaseholdBin string
	pg           *pgtest.Server
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "payments-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	built := make(chan error, 2)
	go func() { built <- procs.BuildPackage(filepath.Join(dir, "payments"), ".") }()
	go func() { built <- procs.BuildPackage(filepath.Join(dir, "leasehold"), "../../cmd/leasehold") }()
	var stop func()
	pg, stop = pgtest.StartMain()
	code := 1
	if err := errors.Join(<-built, <-built); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		workerBin, leaseholdBin = filepath.Join(dir, "payments"), filepath.Join(dir, "leasehold")
		code = m.Run()
	}
	stop()
	os.RemoveAll(dir)
	os.Exit(code)
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

func (e *env) start(name string, environ ...string) *worker {
	t := e.t
	t.Helper()
	addr := testutil.FreeAddr(t)
	w := &worker{name: name, url: "http://" + addr, done: make(chan struct{})}
	w.cmd = exec.Command(workerBin, "--name", name, "--listen", addr, "--dsn", e.dsn,
		"--endpoints", e.endpoint, "--attempt-ttl", e.attemptTT.String())
	w.cmd.Env = append(os.Environ(), environ...)
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

// marker is a fault-point file for a worker (see faultpoint.go), and the
// environment entry that arms it.
func marker(t *testing.T, env string) (path, entry string) {
	path = filepath.Join(t.TempDir(), "reached")
	return path, env + "=" + path
}

// waitFor waits until the worker has written the marker at path.
func (w *worker) waitFor(t *testing.T, path string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, "worker "+w.name+" reaches its fault point", func() bool {
		_, err := os.Stat(path)
		return err == nil
	})
}

// balance is the account's balance: minus the sum of its debits.
func (e *env) balance(account string) int64 {
	ctx := testutil.Context(e.t, 10*time.Second)
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close(ctx)
	var b int64
	if err := conn.QueryRow(ctx, "SELECT balance FROM accounts WHERE account = $1", account).Scan(&b); err != nil {
		e.t.Fatal(err)
	}
	return b
}

// A worker SIGSTOPped inside its payment transaction (after its look-up
// for an earlier charge, before its writes) past its attempt TTL: a retry
// on the other worker takes over and charges; the resumed worker's debit,
// which nothing but the fence stops, is refused. One debit, one payment.
func TestPausedWorkerPastItsAttemptChargesNothing(t *testing.T) {
	e := newEnv(t)
	mark, arm := marker(t, envMarkInTx)
	slow := e.start("slow", arm)
	fast := e.start("fast")
	const body = `{"account":"acct-2","amount":5}`
	first := make(chan answer, 1)
	go func() {
		a, _ := pay(slow.url, "pay-stop", body, 60*time.Second)
		first <- a
	}()
	slow.waitFor(t, mark)
	slow.cmd.Process.Signal(syscall.SIGSTOP)
	got := payUntilDone(t, []string{fast.url}, "pay-stop", body)
	if r := receiptOf(t, got); r["worker"] != "fast" {
		t.Fatalf("the retry's receipt: %v", r)
	}
	slow.cmd.Process.Signal(syscall.SIGCONT)
	late := <-first
	if late.status == http.StatusCreated {
		t.Fatalf("the paused worker answered %d %s after its attempt was taken over", late.status, late.body)
	}
	if b := e.balance("acct-2"); b != -5 {
		t.Fatalf("balance %d after one payment of 5, want -5", b)
	}
	if n := e.charges()["pay-stop"]; n != 1 {
		t.Fatalf("charged %d times", n)
	}
	if again := payUntilDone(t, []string{slow.url, fast.url}, "pay-stop", body); again.body != got.body {
		t.Fatalf("a later retry got %s, want %s", again.body, got.body)
	}
}

// A worker SIGKILLed after its charge committed but before its result was
// stored: the attempt lapses, a retry runs again, finds the charge and
// answers with it. One debit, one receipt.
func TestWorkerKilledAfterTheEffectChargesOnce(t *testing.T) {
	e := newEnv(t)
	mark, arm := marker(t, envMarkAfterCommit)
	dies := e.start("dies", arm)
	ok := e.start("ok")
	const body = `{"account":"acct-3","amount":7}`
	first := make(chan error, 1)
	go func() {
		_, err := pay(dies.url, "pay-kill", body, 60*time.Second)
		first <- err
	}()
	dies.waitFor(t, mark)
	dies.cmd.Process.Kill()
	if err := <-first; err == nil {
		t.Fatal("the killed worker answered")
	}
	got := payUntilDone(t, []string{ok.url}, "pay-kill", body)
	if r := receiptOf(t, got); r["worker"] != "dies" {
		t.Fatalf("the retry charged again instead of finding the charge: %v", r)
	}
	if n := e.charges()["pay-kill"]; n != 1 {
		t.Fatalf("charged %d times", n)
	}
	if b := e.balance("acct-3"); b != -7 {
		t.Fatalf("balance %d after one payment of 7, want -7", b)
	}
	if again, _ := pay(ok.url, "pay-kill", body, 5*time.Second); again.body != got.body {
		t.Fatalf("replay %s, want %s", again.body, got.body)
	}
}

// The leader of a 3-node cluster of real `leasehold serve` processes is
// SIGKILLed while 8 clients per key pay through two workers: the workers
// fail over to the new leader, each key is charged once, every client gets
// the same receipt for a key, and that receipt is for the key's own payload.
func TestLeaderKillChargesOnce(t *testing.T) {
	if pg.Err() != nil {
		t.Skipf("no Postgres: %v", pg.Err())
	}
	nodes := procs.StartServeCluster(t, leaseholdBin, t.TempDir())
	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.URL)
	}
	c, err := client.New(client.Config{Endpoints: urls})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	old := serveLeader(t, nodes, c)
	e := &env{t: t, endpoint: strings.Join(urls, ","), dsn: pg.NewDatabase(t), attemptTT: 2 * time.Second}
	a, b := e.start("a"), e.start("b")
	workers := []string{a.url, b.url}
	const keys, clients = 6, 8
	amount := func(k int) int64 { return int64(10 + k) } // one payload per key, each different
	answers := make([][]answer, keys)
	var answered atomic.Int32
	var wg sync.WaitGroup
	for k := range keys {
		answers[k] = make([]answer, clients)
		for i := range clients {
			wg.Go(func() {
				time.Sleep(time.Duration(k*clients+i) * 80 * time.Millisecond) // spread over the kill
				body := fmt.Sprintf(`{"account":"acct-4","amount":%d}`, amount(k))
				answers[k][i] = payUntilDone(t, workers[i%2:], fmt.Sprintf("lk-%d", k), body)
				answered.Add(1)
			})
		}
	}
	testutil.Eventually(t, 60*time.Second, "a first payment is answered", func() bool { return answered.Load() > 0 })
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	atKill := answered.Load()
	if atKill == keys*clients {
		t.Fatal("every payment was answered before the leader was killed: the load is too short to test a kill")
	}
	if n := serveLeader(t, nodes, c); n == old {
		t.Fatalf("%s still leads after its SIGKILL", old.ID)
	}
	t.Logf("payments answered: %d of %d at the kill of %s, %d when a new leader was seen", atKill, keys*clients, old.ID, answered.Load())
	wg.Wait()
	charges := e.charges()
	var want int64
	for k := range keys {
		key := fmt.Sprintf("lk-%d", k)
		for i := range answers[k] {
			if answers[k][i].body != answers[k][0].body {
				t.Fatalf("%s: client %d got %s, client 0 got %s", key, i, answers[k][i].body, answers[k][0].body)
			}
		}
		if r := receiptOf(t, answers[k][0]); r["key"] != key || r["amount"] != float64(amount(k)) {
			t.Fatalf("%s (amount %d) was answered with %v", key, amount(k), r)
		}
		if charges[key] != 1 {
			t.Fatalf("%s charged %d times", key, charges[key])
		}
		want -= amount(k)
	}
	if got := e.balance("acct-4"); got != want {
		t.Fatalf("balance %d, want %d (one debit per key)", got, want)
	}
}
