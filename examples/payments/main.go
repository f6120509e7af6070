// Command payments is a small HTTP payments API on Postgres, made safe to
// retry with leasehold idempotency keys (idempotency/httpidem) and fenced
// with pgfence: POST /payments with an Idempotency-Key header charges an
// account once, however often the client retries and whichever worker
// process answers.
//
//	payments --listen 127.0.0.1:8080 --dsn postgres://... --endpoints http://127.0.0.1:7420
//
// The charge is one transaction that looks for a payment already recorded
// under the idempotency key (a retry after a worker died between its commit
// and its Complete finds it and answers with it), then checks the attempt's
// fencing token with pgfence, debits the account and records the payment.
// The debit is not idempotent by itself, and the look-up cannot protect it
// from a worker paused between its look-up and its writes: only the fence
// does (that worker's attempt lapsed and was taken over, so its token is
// stale and it writes nothing). So the effect is applied exactly once, and
// every answer for one key is the same receipt.
//
// faultpoint.go holds the hooks the test uses to stop or kill a worker at
// a known point of a request.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/fence/pgfence"
	"github.com/leasehold/leasehold/idempotency/httpidem"
)

const schema = `
SELECT pg_advisory_xact_lock(hashtext('leasehold.examples.payments'));
CREATE TABLE IF NOT EXISTS accounts (
	account text PRIMARY KEY,
	balance bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS payments (
	id         bigserial PRIMARY KEY,
	idem_key   text NOT NULL, -- not unique: only the fence keeps a key to one payment
	account    text NOT NULL,
	amount     bigint NOT NULL,
	token      bigint NOT NULL,
	worker     text NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS payments_idem_key ON payments (idem_key);`

type payment struct {
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
}

type receipt struct {
	Key     string `json:"key"`
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
	Token   uint64 `json:"token"` // the attempt that wrote it
	Worker  string `json:"worker"`
}

type server struct {
	dsn   string
	guard *pgfence.Guard
	name  string
	log   *slog.Logger
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "HTTP address")
	dsn := flag.String("dsn", os.Getenv("PAYMENTS_DSN"), "Postgres DSN")
	endpoints := flag.String("endpoints", "http://127.0.0.1:7420", "leasehold endpoints, comma-separated")
	name := flag.String("name", "worker", "this worker's name, written with each payment")
	ttl := flag.Duration("attempt-ttl", 5*time.Second, "idempotency attempt TTL")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("worker", *name)
	if err := run(*listen, *dsn, strings.Split(*endpoints, ","), *ttl, &server{name: *name, log: log}); err != nil {
		log.Error("payments", "err", err)
		os.Exit(1)
	}
}

func run(listen, dsn string, endpoints []string, ttl time.Duration, s *server) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer db.Close(context.Background())
	if s.guard, err = pgfence.New(); err != nil {
		return err
	}
	if _, err := db.Exec(ctx, schema); err != nil {
		return fmt.Errorf("create tables: %w", err)
	}
	if err := s.guard.Migrate(ctx, db); err != nil {
		return err
	}
	s.dsn = dsn
	c, err := client.New(client.Config{Endpoints: endpoints, Logger: s.log})
	if err != nil {
		return err
	}
	defer c.Close()
	mux := http.NewServeMux()
	mux.Handle("POST /payments", httpidem.Middleware(httpidem.Config{Client: c, Prefix: "payments/", Required: true,
		AttemptTTL: ttl, Logger: s.log}, http.HandlerFunc(s.pay)))
	srv := &http.Server{Addr: listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); srv.Shutdown(context.Background()) }()
	s.log.Info("serving", "addr", listen)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// pay charges once per idempotency key: a payment already recorded under
// the key is the answer; else the debit and the record are fenced by the
// attempt's token.
func (s *server) pay(w http.ResponseWriter, r *http.Request) {
	var p payment
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil || p.Account == "" || p.Amount <= 0 {
		http.Error(w, `{"error":"send {"account": "...", "amount": > 0}"}`, http.StatusBadRequest)
		return
	}
	key := httpidem.Key(r.Context())
	token := httpidem.Token(r.Context())
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	// One connection per request keeps the example free of a pool.
	db, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer db.Close(context.WithoutCancel(ctx))
	rc, err := s.charge(ctx, db, key, token, p)
	var stale *pgfence.StaleTokenError
	if errors.As(err, &stale) {
		// A newer attempt owns this key: nothing was written. 503 is not
		// stored, and this attempt can no longer store anything anyway.
		s.log.Warn("stale attempt refused by the fence", "key", key, "token", token, "err", err)
		http.Error(w, `{"error":"this request was taken over by a retry"}`, http.StatusServiceUnavailable)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	faultPoint(envMarkAfterCommit, time.Hour)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(rc)
}

// charge returns the payment recorded under key, or debits the account and
// records the payment, fenced by token, in one transaction.
func (s *server) charge(ctx context.Context, db *pgx.Conn, key string, token uint64, p payment) (receipt, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return receipt{}, err
	}
	defer tx.Rollback(ctx)
	rc := receipt{Key: key}
	err = tx.QueryRow(ctx, `SELECT account, amount, token, worker FROM payments WHERE idem_key = $1 ORDER BY id LIMIT 1`,
		key).Scan(&rc.Account, &rc.Amount, &rc.Token, &rc.Worker)
	if err == nil {
		return rc, tx.Commit(ctx) // charged by an attempt that died before its Complete
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return receipt{}, err
	}
	faultPoint(envMarkInTx, 2*time.Second)
	if err := s.guard.Check(ctx, tx, "payments/"+key, token); err != nil {
		return receipt{}, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO accounts (account, balance) VALUES ($1, -$2::bigint)
		ON CONFLICT (account) DO UPDATE SET balance = accounts.balance - $2::bigint`, p.Account, p.Amount); err != nil {
		return receipt{}, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO payments (idem_key, account, amount, token, worker) VALUES ($1, $2, $3, $4, $5)`,
		key, p.Account, p.Amount, int64(token), s.name); err != nil {
		return receipt{}, err
	}
	rc = receipt{Key: key, Account: p.Account, Amount: p.Amount, Token: token, Worker: s.name}
	return rc, tx.Commit(ctx)
}
