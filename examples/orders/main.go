// Command orders is a consumer of a leasehold keyed queue that applies
// each message to Postgres: the messages of one order (the message key)
// are its events, applied in send order, each exactly once, however often
// a consumer is paused, killed or a leasehold leader dies.
//
//	orders --dsn postgres://... --endpoints http://127.0.0.1:7420 --queue orders --name c1
//
// Each message body is {"order": "...", "n": 1}: the n-th event of the
// order. It is applied in one transaction that checks the delivery's
// fencing token with pgfence (a consumer paused past its visibility, whose
// message went to another consumer since, writes nothing), skips an event
// already recorded (a consumer that died between its commit and its ack
// left it there; the next delivery only acks it), and records the event.
// Per-key order comes from the queue: at most one message of an order is
// in flight, and its next is not handed out before it is acked.
//
// faultpoint.go holds the hooks the tests use to stop a consumer at a
// known point of a message.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/fence/pgfence"
	"github.com/leasehold/leasehold/queue"
)

const schema = `
SELECT pg_advisory_xact_lock(hashtext('leasehold.examples.orders'));
CREATE TABLE IF NOT EXISTS order_events (
	id       bigserial PRIMARY KEY, -- commit order per order, since one consumer at a time writes an order
	order_id text NOT NULL,
	n        bigint NOT NULL,       -- not unique: only the fence and the skip keep an event to one row
	sequence bigint NOT NULL,
	token    bigint NOT NULL,
	consumer text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS order_events_order ON order_events (order_id, n);
CREATE TABLE IF NOT EXISTS order_refusals (
	order_id text NOT NULL,
	n        bigint NOT NULL,
	token    bigint NOT NULL,
	consumer text NOT NULL,
	reason   text NOT NULL
);`

// event is a message body.
type event struct {
	Order string `json:"order"`
	N     int64  `json:"n"`
}

type consumer struct {
	db    *pool
	guard *pgfence.Guard
	name  string
	work  time.Duration
	log   *slog.Logger
}

func main() {
	dsn := flag.String("dsn", os.Getenv("ORDERS_DSN"), "Postgres DSN")
	endpoints := flag.String("endpoints", "http://127.0.0.1:7420", "leasehold endpoints, comma-separated")
	queueName := flag.String("queue", "orders", "the queue to consume")
	name := flag.String("name", "consumer", "this consumer's name, written with each event")
	concurrency := flag.Int("concurrency", 8, "orders handled at once")
	visibility := flag.Duration("visibility", 10*time.Second, "each delivery's visibility timeout")
	work := flag.Duration("work", 0, "time each event takes on top of its transaction (a slow consumer)")
	drain := flag.Duration("drain", 5*time.Second, "drain bound on SIGTERM")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("consumer", *name)
	k := &consumer{name: *name, work: *work, log: log}
	err := run(*dsn, strings.Split(*endpoints, ","), *queueName, *concurrency, k,
		queue.Concurrency(*concurrency), queue.Visibility(*visibility), queue.Consumer(*name),
		queue.DrainTimeout(*drain), queue.Backoff(100*time.Millisecond, 2*time.Second), queue.Logger(log))
	if err != nil {
		log.Error("orders", "err", err)
		os.Exit(1)
	}
}

func run(dsn string, endpoints []string, queueName string, concurrency int, k *consumer, opts ...queue.Option) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	k.db = newPool(dsn, max(2, concurrency))
	defer k.db.close()
	var err error
	if k.guard, err = pgfence.New(); err != nil {
		return err
	}
	err = k.db.with(ctx, func(db *pgx.Conn) error {
		if _, err := db.Exec(ctx, schema); err != nil {
			return fmt.Errorf("create tables: %w", err)
		}
		return k.guard.Migrate(ctx, db)
	})
	if err != nil {
		return err
	}
	c, err := client.New(client.Config{Endpoints: endpoints, Logger: k.log})
	if err != nil {
		return err
	}
	defer c.Close()
	k.log.Info("consuming", "queue", queueName)
	fmt.Println("ready") // the tests wait for this line
	return queue.Consume(ctx, c, queueName, k.handle, opts...)
}

// handle applies one event. The transaction runs on a context of its own:
// a consumer paused past its visibility finds its handler's context ended
// when it resumes, and it is the fence, not that context, that must stop
// its write (the context's timer may fire after the write starts).
func (k *consumer) handle(ctx context.Context, m *queue.Message) error {
	var ev event
	if err := json.Unmarshal(m.Body, &ev); err != nil || ev.Order != m.Key || ev.N < 1 {
		return fmt.Errorf("message %d of key %q is not an event of that order: %q", m.Sequence, m.Key, m.Body)
	}
	if k.work > 0 {
		time.Sleep(k.work)
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err := k.db.with(wctx, func(db *pgx.Conn) error { return k.apply(wctx, db, m, ev) })
	var stale *pgfence.StaleTokenError
	if errors.As(err, &stale) {
		k.log.Warn("fenced write refused", "order", ev.Order, "n", ev.N, "token", m.Token, "err", err)
		k.refused(wctx, ev, m.Token, "fence")
	}
	if err != nil {
		return err
	}
	faultPoint(envStopAfterCommit, m)
	return nil
}

// apply records the event once, fenced by the delivery's token.
func (k *consumer) apply(ctx context.Context, db *pgx.Conn, m *queue.Message, ev event) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	faultPoint(envStopInTx, m)
	if err := k.guard.Check(ctx, tx, "orders/"+ev.Order, m.Token); err != nil {
		return err
	}
	var done bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM order_events WHERE order_id = $1 AND n = $2)`,
		ev.Order, ev.N).Scan(&done); err != nil {
		return err
	}
	if done {
		// Applied by a delivery whose ack was lost (its consumer died or
		// paused after the commit): only the ack is left to do.
		return tx.Commit(ctx)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO order_events (order_id, n, sequence, token, consumer) VALUES ($1, $2, $3, $4, $5)`,
		ev.Order, ev.N, int64(m.Sequence), int64(m.Token), k.name); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// refused records a refusal for the tests to count.
func (k *consumer) refused(ctx context.Context, ev event, token uint64, reason string) {
	err := k.db.with(ctx, func(db *pgx.Conn) error {
		_, err := db.Exec(ctx, `INSERT INTO order_refusals (order_id, n, token, consumer, reason) VALUES ($1, $2, $3, $4, $5)`,
			ev.Order, ev.N, int64(token), k.name, reason)
		return err
	})
	if err != nil {
		k.log.Warn("could not record a refusal", "err", err)
	}
}
