package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/procs"
	"github.com/leasehold/leasehold/internal/testutil"
)

// queueName is the queue every test consumes.
const queueName = "orders"

// serveNode is one `leasehold serve` process.
type serveNode struct {
	id, url string
	*procs.Proc
}

// env is a cluster of serve processes, a database and a client.
type env struct {
	t     *testing.T
	dir   string
	nodes []*serveNode
	urls  []string
	dsn   string
	c     *client.Client
}

// newEnv starts n serve processes (one, or a cluster bootstrapped from one
// peer list), makes the queue with settings and a database for the events.
func newEnv(t *testing.T, n int, settings client.QueueSettings) *env {
	t.Helper()
	if pg.Err() != nil {
		t.Skipf("no Postgres: %v", pg.Err())
	}
	e := &env{t: t, dir: t.TempDir(), dsn: pg.NewDatabase(t)}
	var peers, raftAddrs, apiAddrs []string
	for i := range n {
		id := fmt.Sprintf("n%d", i+1)
		apiAddrs = append(apiAddrs, testutil.FreeAddr(t))
		raftAddrs = append(raftAddrs, testutil.FreeAddr(t))
		peers = append(peers, id+"="+raftAddrs[i])
		e.nodes = append(e.nodes, &serveNode{id: id, url: "http://" + apiAddrs[i]})
		e.urls = append(e.urls, "http://"+apiAddrs[i])
	}
	for i, nd := range e.nodes {
		args := []string{"serve", "--node-id", nd.id, "--data-dir", filepath.Join(e.dir, nd.id),
			"--api-addr", apiAddrs[i], "--raft-addr", raftAddrs[i], "--log-level", "warn"}
		if n > 1 {
			args = append(args, "--peers", strings.Join(peers, ","))
		}
		p, err := procs.Start(t, e.dir, "leasehold-"+nd.id, procs.ChildEnv(), leaseholdBin, args...)
		if err != nil {
			t.Fatal(err)
		}
		nd.Proc = p
	}
	for _, nd := range e.nodes {
		if err := procs.WaitReady(nd.Proc, nd.url, 60*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if e.c, err = client.New(client.Config{Endpoints: e.urls}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.c.Close() })
	ctx := testutil.Context(t, 60*time.Second)
	if _, err := e.c.CreateQueue(ctx, queueName, settings); err != nil {
		t.Fatal(err)
	}
	return e
}

// consumer starts an orders process and waits until it consumes.
func (e *env) consumer(name string, args []string, environ ...string) *procs.Proc {
	e.t.Helper()
	args = append([]string{"--name", name, "--dsn", e.dsn, "--endpoints", strings.Join(e.urls, ","),
		"--queue", queueName}, args...)
	p, err := procs.Start(e.t, e.dir, "orders-"+name, procs.ChildEnv(environ...), ordersBin, args...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		if e.t.Failed() {
			e.t.Logf("consumer %s stderr:\n%s", name, procs.LastLines(p.Stderr(), 40))
		}
	})
	testutil.Eventually(e.t, 60*time.Second, "consumer "+name+" is ready", func() (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("consumer %s exited: %v: %s", name, p.Err, procs.LastLines(p.Stderr(), 10))
		}
		return strings.Contains(p.Stdout(), "ready"), nil
	})
	return p
}

// leader is the serve node that leads now.
func (e *env) leader() *serveNode {
	e.t.Helper()
	var found *serveNode
	testutil.Eventually(e.t, 60*time.Second, "the cluster has a leader", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		members, err := e.c.Members(ctx)
		if err != nil {
			return false
		}
		for _, m := range members {
			for _, n := range e.nodes {
				if m.Leader && m.ID == n.id && !n.Exited() {
					found = n
					return true
				}
			}
		}
		return false
	})
	return found
}

// db opens a connection to the events' database for the checks.
func (e *env) db() *pgx.Conn {
	e.t.Helper()
	ctx := testutil.Context(e.t, 30*time.Second)
	db, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { db.Close(context.Background()) })
	return db
}

// applied is each order's events as the table holds them, in commit order.
func applied(ctx context.Context, db *pgx.Conn) (map[string][]int64, error) {
	rows, err := db.Query(ctx, `SELECT order_id, n FROM order_events ORDER BY id`)
	if err != nil {
		return nil, err
	}
	out := map[string][]int64{}
	for rows.Next() {
		var order string
		var n int64
		if err := rows.Scan(&order, &n); err != nil {
			return nil, err
		}
		out[order] = append(out[order], n)
	}
	return out, rows.Err()
}

// producer sends orders' events: one goroutine per order sends events
// 1..n in order, each until it is acknowledged (retrying with the same
// dedup id, and after the retry-after hint when refused for
// backpressure).
type producer struct {
	orders, events int
	batch          int // >1: each order's events go in batches of this many
	acked          []atomic.Int64
	refused        atomic.Int64 // sends refused for backpressure
	hint           atomic.Int64 // the smallest retry-after hint seen, ns
	limitNamed     atomic.Bool  // a refusal named the queue's max_depth
	wg             sync.WaitGroup
}

func orderID(i int) string { return "order-" + strconv.Itoa(i) }

func eventMessage(order string, n int64) leasehold.Message {
	return leasehold.Message{Key: order, Body: fmt.Appendf(nil, `{"order":%q,"n":%d}`, order, n),
		DedupID: fmt.Sprintf("%s/%d", order, n)}
}

// produce starts sending; wait for it with p.wg.
func (e *env) produce(ctx context.Context, orders, events, batch int) *producer {
	p := &producer{orders: orders, events: events, batch: max(batch, 1), acked: make([]atomic.Int64, orders)}
	for i := range orders {
		p.wg.Go(func() { p.sendOrder(ctx, e.c, i) })
	}
	return p
}

func (p *producer) sendOrder(ctx context.Context, c *client.Client, i int) {
	order := orderID(i)
	for n := int64(1); n <= int64(p.events) && ctx.Err() == nil; {
		var ms []leasehold.Message
		for j := n; j < n+int64(p.batch) && j <= int64(p.events); j++ {
			ms = append(ms, eventMessage(order, j))
		}
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		_, err := c.SendBatch(sctx, queueName, ms)
		cancel()
		var ra *client.RetryAfterError
		switch {
		case err == nil:
			n += int64(len(ms))
			p.acked[i].Store(n - 1)
		case errors.As(err, &ra):
			p.refused.Add(1)
			if h := p.hint.Load(); h == 0 || int64(ra.RetryAfter) < h {
				p.hint.Store(int64(ra.RetryAfter))
			}
			if strings.Contains(ra.Error(), "max_depth") {
				p.limitNamed.Store(true)
			}
			sleep(ctx, ra.RetryAfter)
		default:
			sleep(ctx, 100*time.Millisecond) // unavailable past the per-send bound: the dedup ids make it safe
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// ackedTotal counts the acknowledged sends.
func (p *producer) ackedTotal() int64 {
	var n int64
	for i := range p.acked {
		n += p.acked[i].Load()
	}
	return n
}

// waitDone waits until every acknowledged send is in the table and the
// queue is empty, then checks the orders: each order's events are 1, 2,
// ... in commit order (send order held, none twice, none lost).
func (e *env) waitDone(p *producer, timeout time.Duration) {
	e.t.Helper()
	db := e.db()
	testutil.Eventually(e.t, timeout, "every acknowledged event is applied and the queue is empty", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got, err := applied(ctx, db)
		if err != nil {
			return false, err.Error()
		}
		for i := range p.orders {
			if acked := p.acked[i].Load(); int64(len(got[orderID(i)])) < acked {
				return false, fmt.Sprintf("%s: %d events applied, %d acknowledged", orderID(i), len(got[orderID(i)]), acked)
			}
		}
		q, err := e.c.Queue(ctx, queueName, 0)
		if err != nil {
			return false, err.Error()
		}
		if q.Depth != 0 {
			return false, fmt.Sprintf("the queue still holds %d messages (%d in flight, %d dead)", q.Depth, q.InFlight, q.Dead)
		}
		return true, ""
	})
	ctx := testutil.Context(e.t, 30*time.Second)
	got, err := applied(ctx, db)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := range p.orders {
		order := orderID(i)
		for j, n := range got[order] {
			if n != int64(j+1) {
				e.t.Fatalf("%s: events applied in the order %v: want 1, 2, 3, ... each once", order, got[order])
			}
		}
		if acked := p.acked[i].Load(); int64(len(got[order])) < acked {
			e.t.Fatalf("%s: %d events applied, %d acknowledged", order, len(got[order]), acked)
		}
	}
}

// marker arms a fault point: the environment entry for a consumer, and
// the file it writes when a message reaches the point.
func marker(t *testing.T, env string) (path, entry string) {
	path = filepath.Join(t.TempDir(), "mark")
	return path, env + "=" + path
}

// markedDelivery waits for the marker and reads the delivery it names.
func markedDelivery(t *testing.T, p *procs.Proc, path string) (order string, seq, token uint64) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, "the consumer reaches its fault point", func() (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("%s exited: %s", p.Name, procs.LastLines(p.Stderr(), 10))
		}
		_, err := os.Stat(path)
		return err == nil, nil
	})
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Sscanf(string(b), "%s %d %d", &order, &seq, &token); err != nil {
		t.Fatalf("marker %q: %v", b, err)
	}
	return order, seq, token
}

// rss is a process's resident set in bytes (Linux).
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}
