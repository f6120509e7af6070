// Command payments is a small HTTP payments API on Postgres, made safe to
// retry with leasehold idempotency keys (idempotency/httpidem) and fenced
// with pgfence: POST /payments with an Idempotency-Key header charges an
// account once, however often the client retries and whichever worker
// process answers.
//
//	payments --listen 127.0.0.1:8080 --dsn postgres://... --endpoints http://127.0.0.1:7420
//
// The charge is written in one transaction that first checks the attempt's
// fencing token with pgfence (a worker paused past its attempt TTL, whose
// key was taken over, writes nothing) and inserts the payment keyed by the
// idempotency key (a retry after a worker died between its commit and its
// Complete finds the row and answers with it). So the effect is applied
// exactly once, and every answer for one key is the same receipt.
//
// --pause-before-write and --exit-after-write are fault hooks for the
// test: the handler sleeps before its transaction (so the test can
// SIGSTOP the process mid-request), or exits after its commit, before
// the result is stored.
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
CREATE TABLE IF NOT EXISTS payments (
	idem_key   text PRIMARY KEY,
	account    text NOT NULL,
	amount     bigint NOT NULL,
	token      bigint NOT NULL,
	worker     text NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now()
);`

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
	dsn       string
	guard     *pgfence.Guard
	name      string
	pause     time.Duration
	exitAfter bool
	log       *slog.Logger
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "HTTP address")
	dsn := flag.String("dsn", os.Getenv("PAYMENTS_DSN"), "Postgres DSN")
	endpoints := flag.String("endpoints", "http://127.0.0.1:7420", "leasehold endpoints, comma-separated")
	name := flag.String("name", "worker", "this worker's name, written with each payment")
	ttl := flag.Duration("attempt-ttl", 5*time.Second, "idempotency attempt TTL")
	pause := flag.Duration("pause-before-write", 0, "fault hook: sleep this long before the payment transaction")
	exitAfter := flag.Bool("exit-after-write", false, "fault hook: exit right after committing a payment, before its result is stored")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("worker", *name)
	if err := run(*listen, *dsn, strings.Split(*endpoints, ","), *ttl, &server{name: *name, pause: *pause, exitAfter: *exitAfter, log: log}); err != nil {
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

// pay charges once per idempotency key: fenced by the attempt's token, and
// keyed by the idempotency key so a retry after a crash finds the charge.
func (s *server) pay(w http.ResponseWriter, r *http.Request) {
	var p payment
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil || p.Account == "" || p.Amount <= 0 {
		http.Error(w, `{"error":"send {"account": "...", "amount": > 0}"}`, http.StatusBadRequest)
		return
	}
	key := httpidem.Key(r.Context())
	token := httpidem.Token(r.Context())
	if s.pause > 0 {
		time.Sleep(s.pause)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	// One connection per request keeps the example free of a pool.
	db, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer db.Close(context.WithoutCancel(ctx))
	tx, err := db.Begin(ctx)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer tx.Rollback(ctx)
	if err := s.guard.Check(ctx, tx, "payments/"+key, token); err != nil {
		// A newer attempt owns this key: write nothing. 503 is not stored,
		// and this attempt can no longer store anything anyway.
		s.log.Warn("stale attempt refused by the fence", "key", key, "token", token, "err", err)
		http.Error(w, `{"error":"this request was taken over by a retry"}`, http.StatusServiceUnavailable)
		return
	}
	var rc receipt
	err = tx.QueryRow(ctx, `
		WITH ins AS (
			INSERT INTO payments (idem_key, account, amount, token, worker) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (idem_key) DO NOTHING
			RETURNING idem_key, account, amount, token, worker)
		SELECT idem_key, account, amount, token, worker FROM ins
		UNION ALL SELECT idem_key, account, amount, token, worker FROM payments WHERE idem_key = $1
		LIMIT 1`, key, p.Account, p.Amount, int64(token), s.name).Scan(&rc.Key, &rc.Account, &rc.Amount, &rc.Token, &rc.Worker)
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if s.exitAfter {
		s.log.Warn("fault hook: exiting after the write, before the result is stored", "key", key)
		os.Exit(3)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(rc)
}
