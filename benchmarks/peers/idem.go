package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/client"
)

// The idempotency comparison: W workers loop {begin an attempt on a new
// key, complete it with a result}; a pair is both, each committed.
const (
	targetIPostgres = "postgres, unique-key table"
	targetIOwn      = "leasehold, client per worker"
	targetIShared   = "leasehold, shared client"
	idemResult      = 64 // bytes of result stored
)

type idemTarget interface {
	// begin starts worker w's attempt on a new key and returns what
	// complete needs.
	begin(ctx context.Context, w int, key string, fingerprint []byte) (complete func(context.Context, []byte) error, err error)
	close()
}

func idemRound(it idemTarget, m meter, sc scenario, target, prefix string, warmup, measure time.Duration) result {
	start := time.Now()
	from, to := start.Add(warmup), start.Add(warmup+measure)
	ctx, cancel := context.WithDeadline(context.Background(), to.Add(lockWait))
	defer cancel()
	var mu sync.Mutex
	var lat []time.Duration
	pairs, errs := 0, 0
	var firstErr string
	use := m.window(from, to)
	var wg sync.WaitGroup
	for w := range sc.Workers {
		wg.Go(func() {
			fp := make([]byte, 32)
			res := make([]byte, idemResult)
			var mine []time.Duration
			n, e := 0, 0
			var myErr error
			for i := 0; time.Now().Before(to); i++ {
				key := fmt.Sprintf("%s/%d/%d", prefix, w, i)
				t0 := time.Now()
				complete, err := it.begin(ctx, w, key, fp)
				if err == nil {
					err = complete(ctx, res)
				}
				t1 := time.Now()
				if err != nil {
					e++
					myErr = err
					time.Sleep(10 * time.Millisecond)
					continue
				}
				if t1.After(from) && t1.Before(to) {
					n++
					mine = append(mine, t1.Sub(t0))
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			pairs += n
			errs += e
			if myErr != nil && firstErr == "" {
				firstErr = myErr.Error()
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	u := <-use
	slices.Sort(lat)
	r := result{scenario: sc, Target: target, Pairs: pairs, PairsPerS: float64(pairs) / measure.Seconds(),
		AcquireP50: quantile(lat, 0.50), AcquireP99: quantile(lat, 0.99), Errors: errs, FirstError: firstErr}
	u.per(&r, pairs)
	return r
}

// pgIdem is the idempotency-key table a Postgres user would write: the
// key unique, begin an INSERT ... ON CONFLICT DO NOTHING of the key with
// the attempt's number and an expiry (a key already there is read
// instead: its stored result, or another attempt's in progress, or an
// expired attempt taken over), complete an UPDATE of the result fenced
// by the attempt's number. Each is one transaction, committed.
type pgIdem struct {
	table string
	conns []*pgx.Conn
}

var errIdemConflict = errors.New("key in progress or completed")

func newPgIdem(ctx context.Context, dsn, table string, workers int) (*pgIdem, error) {
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `CREATE TABLE `+table+` (key text PRIMARY KEY, fingerprint bytea NOT NULL,
		state smallint NOT NULL, attempt bigint NOT NULL, owner text NOT NULL, expires_at timestamptz NOT NULL, result bytea)`); err != nil {
		return nil, err
	}
	p := &pgIdem{table: table}
	for range workers {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			p.close()
			return nil, err
		}
		p.conns = append(p.conns, c)
	}
	return p, nil
}

func (p *pgIdem) begin(ctx context.Context, w int, key string, fp []byte) (func(context.Context, []byte) error, error) {
	c := p.conns[w]
	attempt := rand.Int64()
	tag, err := c.Exec(ctx, `INSERT INTO `+p.table+` (key, fingerprint, state, attempt, owner, expires_at)
		VALUES ($1, $2, 1, $3, 'peers-bench', now() + interval '30 seconds') ON CONFLICT (key) DO NOTHING`, key, fp, attempt)
	if err != nil {
		return nil, err
	}
	if tag.RowsAffected() == 0 {
		// The key exists: take it over if its attempt expired, else
		// answer what is there (never the case in this benchmark: every
		// key is new).
		tag, err = c.Exec(ctx, `UPDATE `+p.table+` SET attempt = $2, expires_at = now() + interval '30 seconds'
			WHERE key = $1 AND state = 1 AND expires_at < now() AND fingerprint = $3`, key, attempt, fp)
		if err != nil {
			return nil, err
		}
		if tag.RowsAffected() == 0 {
			return nil, errIdemConflict
		}
	}
	return func(ctx context.Context, result []byte) error {
		tag, err := c.Exec(ctx, `UPDATE `+p.table+` SET state = 2, result = $3, expires_at = now() + interval '24 hours'
			WHERE key = $1 AND attempt = $2 AND state = 1`, key, attempt, result)
		if err == nil && tag.RowsAffected() != 1 {
			err = errors.New("the attempt was taken over")
		}
		return err
	}, nil
}

func (p *pgIdem) close() {
	if len(p.conns) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		p.conns[0].Exec(ctx, "DROP TABLE "+p.table)
		cancel()
	}
	for _, c := range p.conns {
		c.Close(context.Background())
	}
}

// lhIdem: Client.Begin and Attempt.Complete through the Go client.
type lhIdem struct {
	clients []*client.Client
	all     []*client.Client
}

func newLhIdem(endpoints []string, workers int, shared bool) (*lhIdem, error) {
	l := &lhIdem{}
	var one *client.Client
	for range workers {
		c := one
		if c == nil {
			var err error
			c, err = client.New(client.Config{Endpoints: endpoints, Logger: slog.New(slog.DiscardHandler), Session: clientSession})
			if err != nil {
				l.close()
				return nil, err
			}
			l.all = append(l.all, c)
		}
		if shared {
			one = c
		}
		l.clients = append(l.clients, c)
	}
	return l, nil
}

func (l *lhIdem) begin(ctx context.Context, w int, key string, fp []byte) (func(context.Context, []byte) error, error) {
	a, _, err := l.clients[w].Begin(ctx, key, fp, client.AttemptTTL(30*time.Second), client.IdemOwner("peers-bench"))
	if err != nil {
		return nil, err
	}
	if a == nil {
		return nil, errIdemConflict
	}
	return a.Complete, nil
}

func (l *lhIdem) close() {
	for _, c := range l.all {
		c.Close()
	}
}
