package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// The keyed-queue comparison: W producers send messages to K keys, W
// consumers receive up to queueBatch at a time and ack them; per-key
// order is required of every target and checked (see keyOrder).
//
// Producer p owns the keys k with k % W == p and sends one message at a
// time, each committed before the next (so a key's send order is its
// commit order on every target), with at most queueBacklog of its
// messages unacknowledged, so the send-to-ack latency is the pipeline's
// and not a backlog's.
const (
	queueBatch   = 10
	queueBacklog = 10
	queueBody    = 128
)

// Queue target names.
const (
	targetQPostgres = "postgres, SKIP LOCKED table"
	targetQRedis    = "redis streams, consumer groups"
	targetQOwn      = "leasehold, client per worker"
	targetQShared   = "leasehold, shared client"
)

// A queueTarget sends to and receives from one queue of one round.
type queueTarget interface {
	// send commits one message of key (its index among the round's keys)
	// for producer p.
	send(ctx context.Context, p, key int, body []byte) error
	// receive hands consumer c up to max messages (their bodies), each
	// the oldest unacknowledged of its key, and ack settles them all.
	receive(ctx context.Context, c, max int) (bodies [][]byte, ack func(context.Context) error, err error)
	close()
}

// keyOrder checks per-key order as the consumers see it: each key's
// messages carry 1, 2, 3, ... in send order, and a delivery must carry
// the key's last delivered number + 1 (or the same number again, a
// redelivery). It is checked when a consumer gets a message, before it
// acks it; the next message of a key can only be delivered after that
// ack, so the check needs no lock beyond the key's own number.
type keyOrder struct {
	last        []atomic.Uint64
	violations  atomic.Int64
	redelivered atomic.Int64
}

func (o *keyOrder) saw(key int, seq uint64) {
	prev := o.last[key].Swap(seq)
	switch {
	case seq == prev+1:
	case seq == prev:
		o.redelivered.Add(1)
	default:
		o.violations.Add(1)
	}
}

func encodeMsg(b []byte, key int, seq uint64) {
	binary.LittleEndian.PutUint64(b[0:], uint64(time.Now().UnixNano()))
	binary.LittleEndian.PutUint32(b[8:], uint32(key))
	binary.LittleEndian.PutUint64(b[12:], seq)
}

func decodeMsg(b []byte) (sent time.Time, key int, seq uint64, ok bool) {
	if len(b) < 20 {
		return time.Time{}, 0, 0, false
	}
	return time.Unix(0, int64(binary.LittleEndian.Uint64(b))), int(binary.LittleEndian.Uint32(b[8:])),
		binary.LittleEndian.Uint64(b[12:]), true
}

// queueRound runs W producers and W consumers for warmup+measure and
// reports messages acked in the measured window per second, the
// send-to-ack latency of those, and CPU and allocations per message.
func queueRound(qt queueTarget, m meter, sc scenario, target string, warmup, measure time.Duration) result {
	W := sc.Workers
	start := time.Now()
	from, to := start.Add(warmup), start.Add(warmup+measure)
	ctx, cancel := context.WithDeadline(context.Background(), to.Add(lockWait))
	defer cancel()
	ord := &keyOrder{last: make([]atomic.Uint64, sc.Resources)}
	room := make([]chan struct{}, W) // a producer's unacknowledged messages
	for i := range room {
		room[i] = make(chan struct{}, queueBacklog)
	}
	var mu sync.Mutex
	var lat []time.Duration
	acked, errs := 0, 0
	var firstErr string
	fail := func(err error) {
		mu.Lock()
		errs++
		if firstErr == "" {
			firstErr = err.Error()
		}
		mu.Unlock()
	}
	use := m.window(from, to)
	var wg sync.WaitGroup
	for p := range W {
		wg.Go(func() {
			var keys []int
			for k := p; k < sc.Resources; k += W {
				keys = append(keys, k)
			}
			if len(keys) == 0 {
				return
			}
			seq := make([]uint64, len(keys))
			body := make([]byte, queueBody)
			for i := 0; time.Now().Before(to); i++ {
				select {
				case room[p] <- struct{}{}:
				case <-time.After(time.Until(to)):
					return
				}
				j := i % len(keys)
				seq[j]++
				encodeMsg(body, keys[j], seq[j])
				for time.Now().Before(to) {
					err := qt.send(ctx, p, keys[j], body)
					if err == nil {
						break
					}
					fail(err)
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	for c := range W {
		wg.Go(func() {
			var mine []time.Duration
			n := 0
			for time.Now().Before(to) {
				bodies, ack, err := qt.receive(ctx, c, queueBatch)
				if err != nil {
					fail(err)
					time.Sleep(10 * time.Millisecond)
					continue
				}
				if len(bodies) == 0 {
					continue
				}
				for _, b := range bodies {
					if _, k, s, ok := decodeMsg(b); ok && k < sc.Resources {
						ord.saw(k, s)
					}
				}
				if err := ack(ctx); err != nil {
					fail(err)
					continue
				}
				done := time.Now()
				for _, b := range bodies {
					sent, k, _, ok := decodeMsg(b)
					if !ok {
						continue
					}
					select {
					case <-room[k%W]:
					default:
					}
					if done.After(from) && done.Before(to) && sent.After(start) {
						n++
						mine = append(mine, done.Sub(sent))
					}
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			acked += n
			mu.Unlock()
		})
	}
	wg.Wait()
	u := <-use
	slices.Sort(lat)
	r := result{scenario: sc, Target: target, Pairs: acked, PairsPerS: float64(acked) / measure.Seconds(),
		AcquireP50: quantile(lat, 0.50), AcquireP99: quantile(lat, 0.99), Errors: errs, FirstError: firstErr,
		OrderViolations: ord.violations.Load(), Redelivered: ord.redelivered.Load()}
	u.per(&r, acked)
	return r
}

// pgQueue is the table queue a Postgres user would write: one row a
// message, taken with FOR UPDATE SKIP LOCKED and deleted in the same
// transaction (the delete's commit is the ack; a consumer that dies
// rolls back and the row is free again). Per-key order: a consumer takes
// only a key's head, the row with no older row of its key
// (NOT EXISTS on the (key, id) index). A head in flight is locked, so it
// is skipped, and the row behind it is no head while the locked one is
// there: a key has at most one message in flight, taken in id order,
// and ids follow each key's commit order because a key's producer
// commits one message before it sends the next.
type pgQueue struct {
	table      string
	prod, cons []*pgx.Conn
}

func newPgQueue(ctx context.Context, dsn, table string, workers int) (*pgQueue, error) {
	q := &pgQueue{table: table}
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, fmt.Sprintf(`CREATE TABLE %[1]s (id bigserial PRIMARY KEY, key int NOT NULL, body bytea NOT NULL);
		CREATE INDEX %[1]s_key_id ON %[1]s (key, id)`, table)); err != nil {
		return nil, err
	}
	for range workers {
		for _, side := range []*[]*pgx.Conn{&q.prod, &q.cons} {
			c, err := pgx.Connect(ctx, dsn)
			if err != nil {
				q.close()
				return nil, err
			}
			*side = append(*side, c)
		}
	}
	return q, nil
}

func (q *pgQueue) send(ctx context.Context, p, key int, body []byte) error {
	_, err := q.prod[p].Exec(ctx, "INSERT INTO "+q.table+" (key, body) VALUES ($1, $2)", key, body)
	return err
}

func (q *pgQueue) receive(ctx context.Context, c, max int) ([][]byte, func(context.Context) error, error) {
	conn := q.cons[c]
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, nil, err
	}
	rows, err := tx.Query(ctx, `SELECT id, body FROM `+q.table+` m
		WHERE NOT EXISTS (SELECT 1 FROM `+q.table+` o WHERE o.key = m.key AND o.id < m.id)
		ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`, max)
	if err != nil {
		tx.Rollback(ctx)
		return nil, nil, err
	}
	var ids []int64
	var bodies [][]byte
	for rows.Next() {
		var id int64
		var b []byte
		if err := rows.Scan(&id, &b); err != nil {
			rows.Close()
			tx.Rollback(ctx)
			return nil, nil, err
		}
		ids, bodies = append(ids, id), append(bodies, b)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		tx.Rollback(ctx)
		return nil, nil, err
	}
	if len(ids) == 0 {
		tx.Rollback(ctx)
		// Nothing ready: poll again shortly, as a table queue without
		// LISTEN/NOTIFY does.
		time.Sleep(time.Millisecond)
		return nil, nil, nil
	}
	return bodies, func(ctx context.Context) error {
		if _, err := tx.Exec(ctx, "DELETE FROM "+q.table+" WHERE id = ANY($1)", ids); err != nil {
			tx.Rollback(ctx)
			return err
		}
		return tx.Commit(ctx)
	}, nil
}

func (q *pgQueue) close() {
	if len(q.prod) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		q.prod[0].Exec(ctx, "DROP TABLE "+q.table)
		cancel()
	}
	for _, c := range append(q.prod, q.cons...) {
		c.Close(context.Background())
	}
}

// redisQueue: Redis streams with a consumer group. A consumer group hands
// a stream's entries to whichever consumer reads next, which loses a
// key's order across consumers; so, as Kafka does with partitions, the
// keys are split over W streams (key k to stream k % W) and each stream
// is read by one consumer of the group, which acks what it read (one
// XACK) before it reads again. (Taking a dead consumer's stream over,
// with XAUTOCLAIM, is left out: nothing dies here.) XADD trims each
// stream to about 10,000 entries.
type redisQueue struct {
	c      *redis.Client
	prefix string
	w      int
}

func newRedisQueue(ctx context.Context, addr, prefix string, workers int) (*redisQueue, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 2*workers + 4, MinIdleConns: 2 * workers})
	q := &redisQueue{c: c, prefix: prefix, w: workers}
	for i := range workers {
		if err := c.XGroupCreateMkStream(ctx, q.stream(i), "g", "$").Err(); err != nil {
			c.Close()
			return nil, err
		}
	}
	return q, nil
}

func (q *redisQueue) stream(i int) string { return q.prefix + ":" + strconv.Itoa(i) }

func (q *redisQueue) send(ctx context.Context, p, key int, body []byte) error {
	return q.c.XAdd(ctx, &redis.XAddArgs{Stream: q.stream(key % q.w), MaxLen: 10000, Approx: true,
		Values: []any{"k", key, "b", body}}).Err()
}

func (q *redisQueue) receive(ctx context.Context, c, max int) ([][]byte, func(context.Context) error, error) {
	res, err := q.c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c" + strconv.Itoa(c),
		Streams: []string{q.stream(c), ">"}, Count: int64(max), Block: time.Second}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var ids []string
	var bodies [][]byte
	for _, s := range res {
		for _, m := range s.Messages {
			b, _ := m.Values["b"].(string)
			ids, bodies = append(ids, m.ID), append(bodies, []byte(b))
		}
	}
	if len(ids) == 0 {
		return nil, nil, nil
	}
	return bodies, func(ctx context.Context) error { return q.c.XAck(ctx, q.stream(c), "g", ids...).Err() }, nil
}

func (q *redisQueue) close() {
	ctx := context.Background()
	for i := range q.w {
		q.c.Del(ctx, q.stream(i))
	}
	q.c.Close()
}

// lhQueue is a leasehold keyed queue through the Go client: one client
// per producer and per consumer (separate processes), or one shared by
// the producers and another by the consumers (the goroutines of two
// services). Its keys keep their order by themselves: one message of a
// key in flight at a time, in send order.
type lhQueue struct {
	name       string
	prod, cons []*client.Client
	all        []*client.Client
}

func newLhQueue(ctx context.Context, endpoints []string, name string, workers int, shared bool) (*lhQueue, error) {
	q := &lhQueue{name: name}
	var sp, sc *client.Client
	for range workers {
		p, c := sp, sc
		if p == nil {
			for _, cp := range []**client.Client{&p, &c} {
				cl, err := client.New(client.Config{Endpoints: endpoints, Logger: slog.New(slog.DiscardHandler), Session: clientSession})
				if err != nil {
					q.close()
					return nil, err
				}
				*cp = cl
				q.all = append(q.all, cl)
			}
		}
		if shared {
			sp, sc = p, c
		}
		q.prod, q.cons = append(q.prod, p), append(q.cons, c)
	}
	if _, err := q.prod[0].CreateQueue(ctx, name, client.QueueSettings{}); err != nil {
		q.close()
		return nil, err
	}
	return q, nil
}

func (q *lhQueue) send(ctx context.Context, p, key int, body []byte) error {
	_, err := q.prod[p].Send(ctx, q.name, leasehold.Message{Key: strconv.Itoa(key), Body: body})
	return err
}

func (q *lhQueue) receive(ctx context.Context, c, max int) ([][]byte, func(context.Context) error, error) {
	cl := q.cons[c]
	ds, err := cl.Receive(ctx, q.name, max, client.PollWait(time.Second), client.VisibilityTimeout(30*time.Second),
		client.ConsumerName("c"+strconv.Itoa(c)))
	if err != nil || len(ds) == 0 {
		return nil, nil, err
	}
	bodies := make([][]byte, len(ds))
	for i, d := range ds {
		bodies[i] = d.Body
	}
	return bodies, func(ctx context.Context) error {
		if len(ds) == 1 {
			return cl.Ack(ctx, ds[0])
		}
		errs, err := cl.AckBatch(ctx, ds)
		if err != nil {
			return err
		}
		return errors.Join(errs...)
	}, nil
}

func (q *lhQueue) close() {
	if len(q.all) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		q.all[0].DeleteQueue(ctx, q.name, "peers benchmark: the end of a round")
		cancel()
	}
	for _, c := range q.all {
		c.Close()
	}
}
