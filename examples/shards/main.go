// Command shards is a worker of a partition group: it counts, per shard,
// in a Postgres table of per-shard counters, and works only on the shards
// (partitions) that leasehold assigns to it. Every write is fenced by the
// partition's epoch with pgfence, so a worker that lost a shard (paused
// past its session's TTL, cut off, or slow to stop) can never write to it
// again once the next owner has.
//
//	leasehold groups create shards --partitions 16
//	shards --member w1 --dsn postgres://... --endpoints http://127.0.0.1:7420
//
// Start as many workers as you like; each owns a balanced share of the
// shards, and a worker that dies hands its shards to the others within
// its TTL. With --log each worker appends to a file its hold intervals
// per shard and epoch (start, safe deadlines, stop) and every write's
// outcome: the example's test reads them to prove that no two workers
// ever held one shard at once.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/fence/pgfence"
	"github.com/leasehold/leasehold/groups"
)

const schema = `
SELECT pg_advisory_xact_lock(hashtext('leasehold.examples.shards'));
CREATE TABLE IF NOT EXISTS shard_counters (
	shard   int PRIMARY KEY,
	count   bigint NOT NULL,
	epoch   bigint NOT NULL, -- the epoch of the last write
	member  text NOT NULL
);
CREATE TABLE IF NOT EXISTS shard_writes ( -- every accepted write, for the test
	id      bigserial PRIMARY KEY,
	shard   int NOT NULL,
	epoch   bigint NOT NULL,
	member  text NOT NULL,
	at_ns   bigint NOT NULL -- the worker's clock when it committed
);`

type worker struct {
	member string
	dsn    string
	guard  *pgfence.Guard
	every  time.Duration
	log    *slog.Logger
	own    *ownLog
}

func main() {
	dsn := flag.String("dsn", os.Getenv("SHARDS_DSN"), "Postgres DSN")
	endpoints := flag.String("endpoints", "http://127.0.0.1:7420", "leasehold endpoints, comma-separated")
	group := flag.String("group", "shards", "the partition group (create it first: leasehold groups create)")
	member := flag.String("member", "", "this worker's name in the group (required, unique)")
	ttl := flag.Duration("ttl", 5*time.Second, "member session TTL: a dead worker's shards move after about this long")
	every := flag.Duration("every", 50*time.Millisecond, "time between two increments of one shard")
	logPath := flag.String("log", "", "append hold intervals and writes to this file (for tests)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("member", *member)
	if *member == "" || *dsn == "" {
		fmt.Fprintln(os.Stderr, "shards: --member and --dsn are required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *dsn, strings.Split(*endpoints, ","), *group, *member, *ttl, *every, *logPath, log); err != nil {
		log.Error("shards", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dsn string, endpoints []string, group, member string, ttl, every time.Duration,
	logPath string, log *slog.Logger) error {
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer db.Close(context.WithoutCancel(ctx))
	if _, err := db.Exec(ctx, schema); err != nil {
		return fmt.Errorf("create tables: %w", err)
	}
	guard, err := pgfence.New()
	if err != nil {
		return err
	}
	if err := guard.Migrate(ctx, db); err != nil {
		return err
	}
	own, err := openOwnLog(logPath, member)
	if err != nil {
		return err
	}
	defer own.Close()
	c, err := client.New(client.Config{Endpoints: endpoints, Logger: log})
	if err != nil {
		return err
	}
	defer c.Close()
	w := &worker{member: member, dsn: dsn, guard: guard, every: every, log: log, own: own}
	return groups.Run(ctx, c, group, member, w.shard, groups.TTL(ttl), groups.Logger(log))
}

// shard counts on one shard while this worker owns it with epoch.
func (w *worker) shard(ctx context.Context, shard int, epoch uint64) error {
	w.own.start(shard, epoch, groups.SessionDeadline(ctx))
	defer func() { w.own.stop(shard, epoch) }()
	// One connection per shard keeps the example free of a pool.
	db, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		return err
	}
	defer db.Close(context.WithoutCancel(ctx))
	tick := time.NewTicker(w.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		w.own.hold(shard, epoch, groups.SessionDeadline(ctx))
		stallOnce(shard)
		// The write is not bounded by ctx: a write begun under the grant
		// either commits or is refused by the fence, never half done.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err := w.increment(wctx, db, shard, epoch)
		cancel()
		var stale *pgfence.StaleTokenError
		switch {
		case errors.As(err, &stale):
			w.own.refused(shard, epoch)
			return fmt.Errorf("shard %d: epoch %d refused by the fence: %w", shard, epoch, err)
		case err != nil:
			return fmt.Errorf("shard %d: %w", shard, err)
		}
	}
}

// increment adds one to the shard's counter, fenced by epoch, and records
// the write, in one transaction.
func (w *worker) increment(ctx context.Context, db *pgx.Conn, shard int, epoch uint64) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if err := w.guard.Check(ctx, tx, "shards/"+strconv.Itoa(shard), epoch); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO shard_counters (shard, count, epoch, member) VALUES ($1, 1, $2, $3)
			ON CONFLICT (shard) DO UPDATE SET count = shard_counters.count + 1, epoch = $2, member = $3`,
			shard, int64(epoch), w.member); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO shard_writes (shard, epoch, member, at_ns) VALUES ($1, $2, $3, $4)`,
			shard, int64(epoch), w.member, time.Now().UnixNano())
		return err
	})
}
