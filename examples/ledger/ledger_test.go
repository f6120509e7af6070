package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/fence/pgfence"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/testcluster"

	"github.com/leasehold/leasehold/internal/testutil"
)

var (
	// workerBin is the ledger worker, built by TestMain with go build.
	workerBin string
	// pg is one throwaway Postgres for the package.
	pg *pgtest.Server
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ledger-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Build the worker while Postgres starts.
	built := make(chan error, 1)
	go func() { built <- buildWorker(filepath.Join(dir, "ledger")) }()
	var stop func()
	pg, stop = pgtest.StartMain()
	code := 1
	if err := <-built; err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		workerBin = filepath.Join(dir, "ledger")
		code = m.Run()
	}
	stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildWorker builds this package's command into out, with the race detector
// when the test binary has it: the worker then runs under it too, and the
// build reuses the packages go test has just compiled.
func buildWorker(out string) error {
	args := []string{"build", "-o", out}
	if raceEnabled() {
		args = append(args, "-race")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// go test puts its own GOROOT/bin first on PATH.
	cmd := exec.CommandContext(ctx, "go", append(args, ".")...)
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build of the ledger worker: %w\n%s", err, b)
	}
	fmt.Fprintf(os.Stderr, "ledger_test: built the worker (race=%v) in %v\n", raceEnabled(), time.Since(start).Round(time.Millisecond))
	return nil
}

func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// proc is one worker process.
type proc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer // read only after done is closed
	done           chan struct{}
	err            error
}

func startWorker(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(workerBin, append([]string{"--name", name}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start worker %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			// Still running, perhaps stopped: SIGKILL works on a stopped
			// process, and SIGCONT first does no harm.
			p.cmd.Process.Signal(syscall.SIGCONT)
			p.cmd.Process.Kill()
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				t.Errorf("worker %s (pid %d) did not exit after SIGKILL", name, p.cmd.Process.Pid)
			}
		}
		if t.Failed() {
			t.Logf("worker %s stderr:\n%s", name, p.stderr.String())
		}
	})
	return p
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to worker %s: %v", sig, p.name, err)
	}
}

// wait waits up to d for the worker to exit and returns its summary.
func (p *proc) wait(t *testing.T, d time.Duration) summary {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("worker %s did not finish within %v; stderr:\n%s", p.name, d, p.stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(p.stdout.String()), "\n")
	var s summary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("worker %s (exit: %v) printed no summary: %v\nstdout:\n%s\nstderr:\n%s",
			p.name, p.err, err, p.stdout.String(), p.stderr.String())
	}
	if s.Fatal != "" {
		t.Fatalf("worker %s failed: %s\nstderr:\n%s", p.name, s.Fatal, p.stderr.String())
	}
	return s
}

// waitFor keeps its old name for this package's tests.
var waitFor = testutil.Eventually[func() (bool, error)]

// makePlan makes n transfers back and forth between accounts 1 and 2, with
// ids prefix-01, prefix-02, ... and varied amounts.
func makePlan(prefix string, n int, amount func(i int) int64) []transfer {
	plan := make([]transfer, n)
	for i := range plan {
		from, to := int64(1), int64(2)
		if i%3 == 2 {
			from, to = to, from
		}
		plan[i] = transfer{ID: fmt.Sprintf("%s-%02d", prefix, i+1), From: from, To: to, Amount: amount(i)}
	}
	return plan
}

func planFlag(plan []transfer) string {
	parts := make([]string, len(plan))
	for i, t := range plan {
		parts[i] = fmt.Sprintf("%s:%d:%d:%d", t.ID, t.From, t.To, t.Amount)
	}
	return strings.Join(parts, ",")
}

// row is a committed write in the ledger: a transfer, or a claim (ID empty).
type row struct {
	Seq      int64
	Worker   string
	Token    uint64
	ID       string
	From, To int64
	Amount   int64
	Claim    string // the claimed resource, for a claim
}

func (r row) String() string {
	if r.Claim != "" {
		return fmt.Sprintf("#%d claim %s by %s token %d", r.Seq, r.Claim, r.Worker, r.Token)
	}
	return fmt.Sprintf("#%d transfer %s by %s token %d", r.Seq, r.ID, r.Worker, r.Token)
}

// readRows returns every committed claim and transfer, in the given order.
func readRows(ctx context.Context, conn *pgx.Conn, order string) ([]row, error) {
	rows, _ := conn.Query(ctx, `
		SELECT seq, worker, token, id, from_account, to_account, amount, '' AS claim,
			pg_xact_commit_timestamp(xmin) AS committed
		FROM ledger_transfers
		UNION ALL
		SELECT seq, worker, token, '', 0, 0, 0, resource, pg_xact_commit_timestamp(xmin)
		FROM ledger_claims
		ORDER BY `+order)
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var w row
		var tok int64
		var committed time.Time
		err := r.Scan(&w.Seq, &w.Worker, &tok, &w.ID, &w.From, &w.To, &w.Amount, &w.Claim, &committed)
		w.Token = uint64(tok)
		return w, err
	})
}

func countRows(ctx context.Context, conn *pgx.Conn, worker string) (int, error) {
	var n int
	err := conn.QueryRow(ctx, "SELECT count(*) FROM ledger_transfers WHERE worker = $1", worker).Scan(&n)
	return n, err
}

// TestPausedWorkerIsFenced is the scenario of README.md with real processes:
// worker A holds the accounts' lease (TTL 1s) and is SIGSTOPped mid-run for
// longer than its TTL; worker B takes the lease over with a larger token,
// claims it at the accounts and applies its transfers; A is SIGCONTed and,
// not consulting its lease (--unsafe-skip-context-check), tries its remaining
// transfers with its stale token. The guard must refuse every one of them,
// and the ledger must end exactly as if the accepted transfers were applied
// once each, in commit order.
func TestPausedWorkerIsFenced(t *testing.T) {
	const (
		ttlA         = time.Second
		pauseAtLeast = 2 * ttlA // A stays stopped at least this long
		sleep        = 100 * time.Millisecond
		nA, nB       = 20, 20
		initial      = 1000
	)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()

	dsn := pg.NewDatabase(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	guard := &pgfence.Guard{}
	if err := migrate(ctx, conn, guard); err != nil {
		t.Fatal(err)
	}
	initBalances := map[int64]int64{1: initial, 2: initial}
	for id, b := range initBalances {
		if _, err := conn.Exec(ctx, "INSERT INTO ledger_accounts (id, balance) VALUES ($1, $2)", id, b); err != nil {
			t.Fatal(err)
		}
	}
	node := testcluster.StartNode(t, "")
	t.Logf("postgres and leasehold node up after %v", time.Since(began).Round(time.Millisecond))

	planA := makePlan("A", nA, func(i int) int64 { return int64(10 + i) })
	planB := makePlan("B", nB, func(i int) int64 { return int64(20 + 3*i) })
	common := []string{"--dsn", dsn, "--endpoints", node.URL, "--accounts", "1,2",
		"--sleep", sleep.String(), "--idle-tx-timeout", "500ms"}

	// Worker A: short TTL, and it will not look at its lease before writing.
	a := startWorker(t, "A", append(common, "--ttl", ttlA.String(), "--wait", "10s",
		"--unsafe-skip-context-check", "--plan", planFlag(planA))...)

	// Let A apply a few transfers, then stop it mid-run.
	waitFor(t, 15*time.Second, "worker A to apply 3 transfers", func() (bool, error) {
		n, err := countRows(ctx, conn, "A")
		return n >= 3, err
	})
	a.signal(t, syscall.SIGSTOP)
	stoppedAt := time.Now()

	// Worker B queues for the same accounts. A, stopped, cannot renew: its
	// lease expires on the server within its TTL and B is granted.
	b := startWorker(t, "B", append(common, "--ttl", "5s", "--wait", "20s", "--plan", planFlag(planB))...)
	waitFor(t, 20*time.Second, "worker B to claim and apply 3 transfers", func() (bool, error) {
		n, err := countRows(ctx, conn, "B")
		return n >= 3, err
	})
	if d := pauseAtLeast - time.Since(stoppedAt); d > 0 {
		time.Sleep(d)
	}
	aRowsBeforeResume, err := countRows(ctx, conn, "A")
	if err != nil {
		t.Fatal(err)
	}
	pause := time.Since(stoppedAt)
	// B still has most of its plan ahead of it: A's late writes race B's.
	a.signal(t, syscall.SIGCONT)

	sumA := a.wait(t, 20*time.Second)
	sumB := b.wait(t, 20*time.Second)
	t.Logf("A: token %d, applied %d before the pause (%d in the table before SIGCONT), rejected_stale %d "+
		"(%d while its lease context was still live), other_errors %d %q, lease_lost %v; paused %v",
		sumA.Token, sumA.Applied, aRowsBeforeResume, sumA.RejectedStale, sumA.StaleWhileLeaseLive,
		sumA.OtherErrors, sumA.Errors, sumA.LeaseLost, pause.Round(time.Millisecond))
	t.Logf("B: token %d, applied %d, rejected_stale %d, other_errors %d",
		sumB.Token, sumB.Applied, sumB.RejectedStale, sumB.OtherErrors)

	// The workers' own accounts.
	if sumA.Token == 0 || sumB.Token <= sumA.Token {
		t.Fatalf("tokens: A %d, B %d; B's must be larger", sumA.Token, sumB.Token)
	}
	if sumB.Applied != nB || sumB.RejectedStale != 0 || sumB.OtherErrors != 0 || sumB.ClaimStale {
		t.Errorf("B applied %d of %d, rejected %d, other errors %d %q, claim stale %v; want all applied",
			sumB.Applied, nB, sumB.RejectedStale, sumB.OtherErrors, sumB.Errors, sumB.ClaimStale)
	}
	if sumA.AlreadyApplied != 0 || sumB.AlreadyApplied != 0 {
		t.Errorf("already applied: A %d, B %d; every transfer id is new", sumA.AlreadyApplied, sumB.AlreadyApplied)
	}
	if sumA.Applied+sumA.RejectedStale+sumA.OtherErrors != nA || sumA.NotAttempted != 0 {
		t.Errorf("A accounted for %d+%d+%d of %d transfers, %d not attempted; with --unsafe-skip-context-check it must attempt all",
			sumA.Applied, sumA.RejectedStale, sumA.OtherErrors, nA, sumA.NotAttempted)
	}
	if sumA.RejectedStale < 1 {
		t.Errorf("A had no write rejected as stale")
	}
	// At most one transfer can fail otherwise: the one A was inside, if the
	// SIGSTOP landed mid-transaction and Postgres ended the idle session.
	if sumA.OtherErrors > 1 {
		t.Errorf("A had %d other errors, want at most 1: %q", sumA.OtherErrors, sumA.Errors)
	}
	if !sumA.LeaseLost {
		t.Errorf("A's release did not report the lease as lost")
	}
	if !strings.Contains(a.stderr.String(), "stale token") {
		t.Errorf("A did not log \"stale token\"")
	}
	if aRowsBeforeResume < 3 || aRowsBeforeResume >= nA {
		t.Errorf("A had applied %d of %d transfers when paused; want mid-run", aRowsBeforeResume, nA)
	}

	// The ledger, in commit order. seq is taken after the fence check, under
	// its row lock; the commit timestamps are an independent clock.
	rows, err := readRows(ctx, conn, "seq")
	if err != nil {
		t.Fatal(err)
	}
	byCommitTime, err := readRows(ctx, conn, "committed, seq")
	if err != nil {
		t.Fatal(err)
	}
	for _, order := range [][]row{rows, byCommitTime} {
		var mark uint64
		staleAccepted := 0
		for _, r := range order {
			if r.Token < mark {
				staleAccepted++
				t.Errorf("stale write accepted: %v after token %d", r, mark)
			}
			mark = max(mark, r.Token)
		}
		if staleAccepted != 0 {
			t.Fatalf("%d stale writes accepted", staleAccepted)
		}
	}
	if !slices.Equal(rows, byCommitTime) {
		t.Errorf("seq order and commit-timestamp order differ:\n%v\n%v", rows, byCommitTime)
	}

	firstClaimB := int64(-1)
	var gotA, gotB []string
	tokens := map[string]uint64{"A": sumA.Token, "B": sumB.Token}
	for _, r := range rows {
		if r.Token != tokens[r.Worker] {
			t.Errorf("%v: want the writer's token %d", r, tokens[r.Worker])
		}
		switch {
		case r.Claim != "":
			if r.Worker == "B" && firstClaimB < 0 {
				firstClaimB = r.Seq
			}
		case r.Worker == "A":
			gotA = append(gotA, r.ID)
			if firstClaimB >= 0 {
				t.Errorf("%v landed after B's claim (#%d)", r, firstClaimB)
			}
		case r.Worker == "B":
			gotB = append(gotB, r.ID)
		default:
			t.Errorf("%v: unknown worker", r)
		}
	}
	if firstClaimB < 0 {
		t.Fatalf("no claim by B in the ledger")
	}
	if len(gotA) != aRowsBeforeResume {
		t.Errorf("A has %d transfers in the ledger, %d before it was resumed: a write after the pause landed", len(gotA), aRowsBeforeResume)
	}
	// Applied once each, in plan order, exactly what the workers report.
	idsOf := func(p []transfer) []string {
		ids := make([]string, len(p))
		for i, t := range p {
			ids[i] = t.ID
		}
		return ids
	}
	if !slices.Equal(gotA, sumA.AppliedIDs) || !slices.Equal(gotA, idsOf(planA[:len(gotA)])) {
		t.Errorf("A's transfers in the ledger %v; A reports %v; want a prefix of its plan", gotA, sumA.AppliedIDs)
	}
	if !slices.Equal(gotB, sumB.AppliedIDs) || !slices.Equal(gotB, idsOf(planB)) {
		t.Errorf("B's transfers in the ledger %v; B reports %v; want its whole plan", gotB, sumB.AppliedIDs)
	}
	for _, id := range sumA.RejectedIDs {
		if slices.Contains(gotA, id) {
			t.Errorf("transfer %s was reported rejected but is in the ledger", id)
		}
	}

	// Balances: the initial ones plus the accepted transfers, once each, in
	// commit order; and the same from the plans the workers were given.
	want := map[int64]int64{}
	fromPlans := map[int64]int64{}
	for id, b := range initBalances {
		want[id], fromPlans[id] = b, b
	}
	planned := map[string]transfer{}
	for _, t := range append(slices.Clone(planA), planB...) {
		planned[t.ID] = t
	}
	for _, r := range rows {
		if r.Claim != "" {
			continue
		}
		if p := planned[r.ID]; p.From != r.From || p.To != r.To || p.Amount != r.Amount {
			t.Errorf("%v moved %d from %d to %d; the plan says %+v", r, r.Amount, r.From, r.To, p)
		}
		want[r.From] -= r.Amount
		want[r.To] += r.Amount
	}
	for _, t := range append(slices.Clone(planA[:aRowsBeforeResume]), planB...) {
		fromPlans[t.From] -= t.Amount
		fromPlans[t.To] += t.Amount
	}
	got := map[int64]int64{}
	brows, _ := conn.Query(ctx, "SELECT id, balance FROM ledger_accounts")
	var id, bal, total int64
	if _, err := pgx.ForEachRow(brows, []any{&id, &bal}, func() error {
		got[id] = bal
		total += bal
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) || !maps.Equal(got, fromPlans) {
		t.Errorf("balances %v; from the ledger's transfers %v; from the plans %v", got, want, fromPlans)
	}
	if total != 2*initial {
		t.Errorf("total money %d, want %d", total, 2*initial)
	}
	// The guard's marks are B's token.
	for _, r := range sumB.Resources {
		if m, ok, err := guard.Current(ctx, conn, r); err != nil || !ok || m != sumB.Token {
			t.Errorf("mark of %s = %d, %v, %v; want B's token %d", r, m, ok, err, sumB.Token)
		}
	}
	t.Logf("ledger: %d rows (%d of A, %d of B, B's claim at #%d), balances %v, total %d; test took %v",
		len(rows), len(gotA), len(gotB), firstClaimB, got, total, time.Since(began).Round(time.Millisecond))
	if d := time.Since(began); d > 60*time.Second {
		t.Errorf("the scenario took %v; it must stay under 60s", d)
	}
}
