// Command ledger is a worker that moves money between accounts in Postgres
// while holding a leasehold lease on them, and writes through the Postgres
// fencing guard (fence/pgfence) so that a worker whose lease has passed to
// someone else cannot write any more, even if it does not know it yet.
//
// One run:
//
//  1. connects to Postgres (--dsn) and creates the ledger tables and the
//     guard's table if they do not exist;
//  2. takes one lease on every account it will touch (resources
//     "ledger/account/<id>", --ttl, waiting up to --wait);
//  3. claims its fencing token at those resources (pgfence Guard.Claim), in a
//     transaction of its own, before its first write;
//  4. performs the transfers of its plan in order, each one Postgres
//     transaction that checks the token for both accounts (Guard.Check), then
//     moves the money and records the transfer with the writer's token;
//  5. reports progress to the lease after each transfer, and stops when the
//     lease's context ends;
//  6. releases the lease and prints one JSON summary line on stdout.
//
// A transfer refused for a stale token is rolled back, logged ("stale token",
// with the offered and current tokens), counted, and never retried under the
// same lease: the worker moves on. Logs go to stderr.
//
// --unsafe-skip-context-check makes the worker ignore the lease's context and
// attempt every transfer of its plan whatever happens to its lease. It exists
// for the demonstration only (see README.md): it makes certain that a worker
// resumed after a pause really does try to write with its stale token, so the
// guard, not the worker's good manners, is seen to refuse it. Never use it in
// a real worker.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/fence/pgfence"
)

// schemaSQL creates the ledger's tables. Every row the workers write (claims
// and transfers) takes its seq from one sequence, after the fence check, while
// the check's row lock is held: for writers of the same accounts, seq order is
// commit order.
const schemaSQL = `
CREATE TABLE IF NOT EXISTS ledger_accounts (
	id      bigint PRIMARY KEY,
	balance bigint NOT NULL
);
CREATE SEQUENCE IF NOT EXISTS ledger_seq;
CREATE TABLE IF NOT EXISTS ledger_transfers (
	id           text        PRIMARY KEY,
	from_account bigint      NOT NULL REFERENCES ledger_accounts (id),
	to_account   bigint      NOT NULL REFERENCES ledger_accounts (id),
	amount       bigint      NOT NULL CHECK (amount > 0),
	worker       text        NOT NULL,
	token        bigint      NOT NULL,
	seq          bigint      NOT NULL UNIQUE DEFAULT nextval('ledger_seq'),
	committed_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS ledger_claims (
	seq          bigint      PRIMARY KEY DEFAULT nextval('ledger_seq'),
	worker       text        NOT NULL,
	resource     text        NOT NULL,
	token        bigint      NOT NULL,
	committed_at timestamptz NOT NULL DEFAULT clock_timestamp()
)`

// moveSQL moves $3 from account $1 to account $2 in one statement; it must
// update exactly two rows.
const moveSQL = `UPDATE ledger_accounts
SET balance = balance + CASE WHEN id = $1 THEN -$3::bigint ELSE $3::bigint END
WHERE id IN ($1, $2)`

const recordSQL = `INSERT INTO ledger_transfers (id, from_account, to_account, amount, worker, token)
VALUES ($1, $2, $3, $4, $5, $6)`

// resourcePrefix names an account's resource, both in leasehold and in the
// guard's table.
const resourcePrefix = "ledger/account/"

func accountResource(id int64) string { return resourcePrefix + strconv.FormatInt(id, 10) }

// transfer is one line of a plan.
type transfer struct {
	ID     string
	From   int64
	To     int64
	Amount int64
}

// resources are the guard resources the transfer touches, sorted, so that
// every worker takes the guard's row locks in the same order and two
// transactions can never wait on each other.
func (t transfer) resources() []string {
	rs := []string{accountResource(t.From), accountResource(t.To)}
	slices.Sort(rs)
	return rs
}

// summary is the one JSON line printed on stdout at the end.
type summary struct {
	Worker    string   `json:"worker"`
	Resources []string `json:"resources"`
	LeaseID   uint64   `json:"lease_id"`
	Token     uint64   `json:"token"`
	Planned   int      `json:"planned"`
	Applied   int      `json:"applied"`
	// RejectedStale counts transfers the guard refused: the lease had
	// passed to a newer holder.
	RejectedStale int `json:"rejected_stale"`
	// StaleWhileLeaseLive counts the refused transfers attempted while the
	// worker's own lease context had not ended yet: the window that only the
	// fence closes.
	StaleWhileLeaseLive int `json:"stale_while_lease_live"`
	// AlreadyApplied counts transfers whose id was already in the ledger
	// (a re-run of a plan): not applied again.
	AlreadyApplied int `json:"already_applied"`
	// OtherErrors counts transfers that failed for any other reason.
	OtherErrors int `json:"other_errors"`
	// NotAttempted counts transfers skipped because the lease had ended (or
	// the worker was told to stop) before them.
	NotAttempted int      `json:"not_attempted"`
	ClaimStale   bool     `json:"claim_stale"`
	LeaseLost    bool     `json:"lease_lost"`
	AppliedIDs   []string `json:"applied_ids"`
	RejectedIDs  []string `json:"rejected_ids"`
	Errors       []string `json:"errors,omitempty"`
	Fatal        string   `json:"fatal,omitempty"`
}

type config struct {
	dsn           string
	endpoints     string
	name          string
	accounts      string
	ttl           time.Duration
	wait          time.Duration
	sleep         time.Duration
	txTimeout     time.Duration
	idleTxTimeout time.Duration
	plan          string
	planFile      string
	gen           int
	initBalance   int64
	unsafeSkip    bool
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "ledger:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("worker", cfg.name)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	w := &worker{cfg: cfg, log: log}
	w.sum.Worker = cfg.name
	w.sum.AppliedIDs, w.sum.RejectedIDs = []string{}, []string{}
	err = w.run(ctx)
	if err != nil {
		w.sum.Fatal = err.Error()
		log.Error("worker failed", "err", err)
	}
	out, _ := json.Marshal(w.sum)
	fmt.Fprintln(stdout, string(out))
	if err != nil || w.sum.OtherErrors > 0 {
		return 1
	}
	return 0
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("ledger", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.dsn, "dsn", envOr("LEDGER_DSN", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"),
		"Postgres connection string (env LEDGER_DSN)")
	fs.StringVar(&c.endpoints, "endpoints", envOr("LEASEHOLD_ENDPOINTS", "http://127.0.0.1:7420"),
		"leasehold endpoints, comma-separated (env LEASEHOLD_ENDPOINTS)")
	fs.StringVar(&c.name, "name", "", "this worker's name, recorded with its writes (default: worker-<pid>)")
	fs.StringVar(&c.accounts, "accounts", "1,2", "comma-separated account ids to lease; every transfer must stay within them")
	fs.DurationVar(&c.ttl, "ttl", 2*time.Second, "lease TTL (short on purpose: a pause longer than this loses the lease)")
	fs.DurationVar(&c.wait, "wait", 30*time.Second, "how long to queue for the lease if another worker holds it")
	fs.DurationVar(&c.sleep, "sleep", 200*time.Millisecond, "pause between transfers, so that a SIGSTOP can land mid-run")
	fs.DurationVar(&c.txTimeout, "tx-timeout", 10*time.Second, "bound on one transfer's transaction")
	fs.DurationVar(&c.idleTxTimeout, "idle-tx-timeout", 5*time.Second,
		"Postgres idle_in_transaction_session_timeout for this worker's session: a worker paused inside a transaction "+
			"loses its session (and its row locks) after this long, instead of blocking the next holder (0: server default)")
	fs.StringVar(&c.plan, "plan", "", `transfers "ID:FROM:TO:AMOUNT,..." (IDs unique)`)
	fs.StringVar(&c.planFile, "plan-file", "", `file with one transfer per line, "ID FROM TO AMOUNT" ('#' starts a comment)`)
	fs.IntVar(&c.gen, "gen", 0, "generate N transfers back and forth between the first two accounts, with IDs <name>-<i>")
	fs.Int64Var(&c.initBalance, "init-balance", -1, "create the accounts that do not exist yet with this balance (-1: they must exist)")
	fs.BoolVar(&c.unsafeSkip, "unsafe-skip-context-check", false,
		"DEMO ONLY: do not consult the lease's context before writing, so a worker resumed after a pause "+
			"certainly tries its writes with a stale token (the guard must refuse them)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.name == "" {
		c.name = fmt.Sprintf("worker-%d", os.Getpid())
	}
	n := 0
	for _, s := range []bool{c.plan != "", c.planFile != "", c.gen > 0} {
		if s {
			n++
		}
	}
	if n != 1 {
		return c, errors.New("give exactly one of --plan, --plan-file or --gen")
	}
	return c, nil
}

func parseAccounts(s string) ([]int64, error) {
	var ids []int64
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--accounts: %q is not an account id", f)
		}
		if slices.Contains(ids, id) {
			return nil, fmt.Errorf("--accounts: %d is listed twice", id)
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, errors.New("--accounts: no account given")
	}
	return ids, nil
}

// parsePlan reads transfers from --plan (comma-separated ID:FROM:TO:AMOUNT),
// --plan-file (one "ID FROM TO AMOUNT" per line) or --gen.
func (c config) parsePlan(accounts []int64) ([]transfer, error) {
	var lines []string
	switch {
	case c.plan != "":
		for f := range strings.SplitSeq(c.plan, ",") {
			lines = append(lines, strings.ReplaceAll(f, ":", " "))
		}
	case c.planFile != "":
		b, err := os.ReadFile(c.planFile)
		if err != nil {
			return nil, fmt.Errorf("--plan-file: %w", err)
		}
		lines = strings.Split(string(b), "\n")
	case c.gen > 0:
		if len(accounts) < 2 {
			return nil, errors.New("--gen needs two accounts")
		}
		for i := 1; i <= c.gen; i++ {
			from, to := accounts[0], accounts[1]
			if i%2 == 0 {
				from, to = to, from
			}
			lines = append(lines, fmt.Sprintf("%s-%03d %d %d %d", c.name, i, from, to, 10*(i%7+1)))
		}
	}
	var plan []transfer
	seen := map[string]bool{}
	for i, l := range lines {
		if j := strings.IndexByte(l, '#'); j >= 0 {
			l = l[:j]
		}
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if len(f) != 4 {
			return nil, fmt.Errorf("plan line %d: want ID FROM TO AMOUNT, got %q", i+1, l)
		}
		t := transfer{ID: f[0]}
		var errs [3]error
		t.From, errs[0] = strconv.ParseInt(f[1], 10, 64)
		t.To, errs[1] = strconv.ParseInt(f[2], 10, 64)
		t.Amount, errs[2] = strconv.ParseInt(f[3], 10, 64)
		if err := errors.Join(errs[:]...); err != nil {
			return nil, fmt.Errorf("plan line %d: %w", i+1, err)
		}
		switch {
		case seen[t.ID]:
			return nil, fmt.Errorf("plan line %d: transfer id %q is used twice", i+1, t.ID)
		case t.From == t.To:
			return nil, fmt.Errorf("plan line %d: transfer %s moves money from account %d to itself", i+1, t.ID, t.From)
		case t.Amount <= 0:
			return nil, fmt.Errorf("plan line %d: transfer %s: amount must be positive", i+1, t.ID)
		case !slices.Contains(accounts, t.From) || !slices.Contains(accounts, t.To):
			return nil, fmt.Errorf("plan line %d: transfer %s touches an account outside --accounts %v", i+1, t.ID, accounts)
		}
		seen[t.ID] = true
		plan = append(plan, t)
	}
	if len(plan) == 0 {
		return nil, errors.New("the plan has no transfers")
	}
	return plan, nil
}

type worker struct {
	cfg   config
	log   *slog.Logger
	conn  *pgx.Conn
	guard *pgfence.Guard
	sum   summary
}

func (w *worker) run(ctx context.Context) error {
	accounts, err := parseAccounts(w.cfg.accounts)
	if err != nil {
		return err
	}
	plan, err := w.cfg.parsePlan(accounts)
	if err != nil {
		return err
	}
	w.sum.Planned = len(plan)
	resources := make([]string, len(accounts))
	for i, a := range accounts {
		resources[i] = accountResource(a)
	}
	slices.Sort(resources)
	w.sum.Resources = resources

	w.guard, err = pgfence.New(pgfence.OnReject(func(resource string, offered, current uint64) {
		w.log.Debug("guard refused a token", "resource", resource, "offered", offered, "current", current)
	}))
	if err != nil {
		return err
	}
	if err := w.connect(ctx); err != nil {
		return err
	}
	defer func() { w.conn.Close(context.WithoutCancel(ctx)) }()
	if err := w.migrate(ctx, accounts); err != nil {
		return err
	}

	lc, err := client.New(client.Config{Endpoints: strings.Split(w.cfg.endpoints, ","), Logger: w.log})
	if err != nil {
		return err
	}
	defer lc.Close() // after the lease's release, deferred below
	w.log.Info("acquiring lease", "resources", resources, "ttl", w.cfg.ttl, "wait", w.cfg.wait)
	lease, err := lc.AcquireMany(ctx, resources, client.TTL(w.cfg.ttl), client.Wait(w.cfg.wait),
		client.Owner(w.cfg.name), client.Operation("ledger transfers"))
	if err != nil {
		return fmt.Errorf("acquire %v: %w", resources, err)
	}
	w.sum.LeaseID, w.sum.Token = lease.ID(), lease.Token()
	w.log.Info("lease acquired", "lease", lease.ID(), "token", lease.Token())
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := lease.Release(rctx); err != nil {
			if errors.Is(err, client.ErrLeaseLost) {
				w.sum.LeaseLost = true
			}
			w.log.Warn("release", "err", err)
		}
	}()
	// The work runs under the lease's context: it ends when the lease is lost
	// (or the worker is told to stop).
	work := lease.Context(ctx)

	// Claim before the first write: from this commit on, an ex-holder's late
	// write is refused even if this worker has not written yet.
	if err := w.claim(ctx, resources, lease.Token()); err != nil {
		if errors.Is(err, pgfence.ErrStaleToken) {
			w.sum.ClaimStale = true
			w.sum.NotAttempted = len(plan)
			w.log.Warn("stale token at claim: a newer holder already claimed the accounts; not writing", "err", err)
			return nil
		}
		return fmt.Errorf("claim: %w", err)
	}
	w.log.Info("claimed", "resources", resources, "token", lease.Token())

	for i, t := range plan {
		if !w.cfg.unsafeSkip && work.Err() != nil {
			w.sum.NotAttempted = len(plan) - i
			w.log.Warn("lease context ended; stopping", "cause", context.Cause(work), "not_attempted", w.sum.NotAttempted)
			break
		}
		if ctx.Err() != nil { // SIGINT or SIGTERM: stop whatever the mode
			w.sum.NotAttempted = len(plan) - i
			break
		}
		liveBefore := work.Err() == nil
		err := w.apply(ctx, t, lease.Token())
		var stale *pgfence.StaleTokenError
		switch {
		case err == nil:
			w.sum.Applied++
			w.sum.AppliedIDs = append(w.sum.AppliedIDs, t.ID)
			w.log.Info("transfer applied", "transfer", t.ID, "from", t.From, "to", t.To, "amount", t.Amount, "token", lease.Token())
		case isDuplicate(err):
			// The id is the transfer's idempotency key: a worker re-run
			// with the same plan does not move the money twice.
			w.sum.AlreadyApplied++
			w.log.Warn("transfer already in the ledger; skipping", "transfer", t.ID)
		case errors.As(err, &stale):
			// Rolled back. The lease has passed on: never retry this
			// transfer under it. The next holder owns the rest of the work.
			w.sum.RejectedStale++
			w.sum.RejectedIDs = append(w.sum.RejectedIDs, t.ID)
			if liveBefore {
				w.sum.StaleWhileLeaseLive++
			}
			w.log.Warn("stale token", "transfer", t.ID, "resource", stale.Resource,
				"offered", stale.Offered, "current", stale.Current, "lease_context_live", liveBefore)
		default:
			w.sum.OtherErrors++
			w.sum.Errors = append(w.sum.Errors, fmt.Sprintf("%s: %v", t.ID, err))
			w.log.Error("transfer failed", "transfer", t.ID, "err", err)
		}
		// Renewal continues only while the worker reports progress.
		lease.Progress(fmt.Sprintf("transfer %d/%d (%s) done", i+1, len(plan), t.ID))
		if i == len(plan)-1 {
			break
		}
		if w.cfg.unsafeSkip {
			sleepCtx(ctx, w.cfg.sleep)
		} else {
			sleepCtx(work, w.cfg.sleep)
		}
	}
	w.log.Info("done", "applied", w.sum.Applied, "rejected_stale", w.sum.RejectedStale,
		"other_errors", w.sum.OtherErrors, "not_attempted", w.sum.NotAttempted)
	return nil
}

// isDuplicate reports whether err is the ledger refusing a transfer id it
// already holds.
func isDuplicate(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "ledger_transfers_pkey"
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// connect (re)opens the worker's Postgres session.
func (w *worker) connect(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, w.cfg.txTimeout)
	defer cancel()
	pc, err := pgx.ParseConfig(w.cfg.dsn)
	if err != nil {
		return fmt.Errorf("--dsn: %w", err)
	}
	if w.cfg.idleTxTimeout > 0 {
		pc.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(w.cfg.idleTxTimeout.Milliseconds(), 10)
	}
	conn, err := pgx.ConnectConfig(cctx, pc)
	if err != nil {
		return fmt.Errorf("connect to Postgres: %w", err)
	}
	if w.conn != nil {
		w.conn.Close(context.WithoutCancel(ctx))
	}
	w.conn = conn
	return nil
}

// migrate creates the tables, serialized across workers by an advisory lock
// (CREATE ... IF NOT EXISTS alone can fail when two workers race), and the
// accounts if --init-balance says so.
func (w *worker) migrate(ctx context.Context, accounts []int64) error {
	mctx, cancel := context.WithTimeout(ctx, w.cfg.txTimeout)
	defer cancel()
	if err := migrate(mctx, w.conn, w.guard); err != nil {
		return err
	}
	if w.cfg.initBalance >= 0 {
		for _, a := range accounts {
			if _, err := w.conn.Exec(mctx, "INSERT INTO ledger_accounts (id, balance) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
				a, w.cfg.initBalance); err != nil {
				return fmt.Errorf("create account %d: %w", a, err)
			}
		}
	}
	var n int
	if err := w.conn.QueryRow(mctx, "SELECT count(*) FROM ledger_accounts WHERE id = ANY($1)", accounts).Scan(&n); err != nil {
		return err
	}
	if n != len(accounts) {
		return fmt.Errorf("only %d of accounts %v exist; create them (or pass --init-balance)", n, accounts)
	}
	return nil
}

// migrate creates the ledger's tables and the guard's table. It is safe to
// run from many processes at once.
func migrate(ctx context.Context, db pgfence.DB, g *pgfence.Guard) error {
	// Without arguments pgx sends this as one simple-protocol query: one
	// implicit transaction, so the advisory lock covers the CREATEs.
	if _, err := db.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('leasehold.examples.ledger'));\n"+schemaSQL); err != nil {
		return fmt.Errorf("create ledger tables: %w", err)
	}
	if err := g.Migrate(ctx, db); err != nil {
		return err
	}
	return nil
}

// claim records token at every resource in one short transaction of its own,
// committed before the first transfer, with a ledger_claims row per resource
// so that the claim's place in the commit order can be seen.
func (w *worker) claim(ctx context.Context, resources []string, token uint64) error {
	cctx, cancel := context.WithTimeout(ctx, w.cfg.txTimeout)
	defer cancel()
	tx, err := w.conn.Begin(cctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(cctx))
	for _, r := range resources { // sorted: one lock order for every worker
		if err := w.guard.Claim(cctx, tx, r, token); err != nil {
			return err
		}
		if _, err := tx.Exec(cctx, "INSERT INTO ledger_claims (worker, resource, token) VALUES ($1, $2, $3)",
			w.cfg.name, r, int64(token)); err != nil {
			return err
		}
	}
	return tx.Commit(cctx)
}

// apply performs one transfer as one transaction: the fence check for every
// account it touches, then the balances and the transfer's row. The check and
// the write commit or roll back together.
func (w *worker) apply(ctx context.Context, t transfer, token uint64) error {
	if w.conn.IsClosed() {
		// The last transaction broke the session (a timeout, or Postgres
		// ended an idle transaction while we were paused): start afresh.
		if err := w.connect(ctx); err != nil {
			return err
		}
	}
	tctx, cancel := context.WithTimeout(ctx, w.cfg.txTimeout)
	defer cancel()
	tx, err := w.conn.Begin(tctx)
	if err != nil {
		return err
	}
	// A no-op after Commit; after a refusal or an error, the point.
	defer tx.Rollback(context.WithoutCancel(tctx))
	for _, r := range t.resources() {
		if err := w.guard.Check(tctx, tx, r, token); err != nil {
			return err
		}
	}
	tag, err := tx.Exec(tctx, moveSQL, t.From, t.To, t.Amount)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 2 {
		return fmt.Errorf("transfer %s: updated %d accounts, want 2", t.ID, tag.RowsAffected())
	}
	if _, err := tx.Exec(tctx, recordSQL, t.ID, t.From, t.To, t.Amount, w.cfg.name, int64(token)); err != nil {
		return err
	}
	return tx.Commit(tctx)
}
