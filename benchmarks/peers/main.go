// Command peers runs the same workloads against leasehold and what users
// would pick instead, on this machine, alternating targets, and writes
// Markdown tables, a JSON file and an SVG plot of the lock rounds.
//
// Locks against etcd: workers loop {acquire a random one of N resources,
// release} with an empty critical section: etcd through concurrency.Mutex
// (one shared clientv3, one session per worker), leasehold through its Go
// client (one client per worker, and one client shared by all workers).
// Keyed queues (send, receive, ack, per-key order kept and checked)
// against a Postgres table queue (FOR UPDATE SKIP LOCKED) and Redis
// streams with a consumer group (appendfsync always); idempotency keys
// (begin, complete) against a Postgres unique-key table. run.sh installs
// etcd and Redis and builds leasehold; see docs/benchmarks.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/client"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "leases" {
		leasesMain(os.Args[2:])
		return
	}
	etcdBin := flag.String("etcd", "etcd", "etcd server binary")
	lhBin := flag.String("leasehold", "leasehold", "leasehold binary")
	baseBin := flag.String("baseline", "", "another leasehold binary (an earlier build) to serve beside, alternating with the others; the Go client is always this tree's, compiled in")
	out := flag.String("out", ".", "directory for results.md, results.json and results.svg")
	work := flag.String("work-dir", "", "directory for the nodes' data and logs (default: a new temp dir, removed at the end)")
	warmup := flag.Duration("warmup", time.Second, "warm-up of each round, not measured")
	measure := flag.Duration("duration", 5*time.Second, "measured time of each round")
	nodesF := flag.String("nodes", "1,3", "cluster sizes")
	resF := flag.String("resources", "1024,1", "resources the workers choose from")
	workersF := flag.String("workers", "1,16,64", "worker counts")
	primF := flag.String("primitives", "lock,queue,idem", "what to compare: lock (against etcd), queue (keyed queue against a Postgres SKIP LOCKED table and Redis streams), idem (idempotency keys against a Postgres unique-key table)")
	qworkersF := flag.String("queue-workers", "16,64", "worker counts of the queue and idempotency rounds (a queue worker is a producer and a consumer)")
	keys := flag.Int("keys", 1024, "keys the queue rounds send to")
	pgBin := flag.String("pg-bin", "", "directory of PostgreSQL's initdb, pg_ctl and postgres (default: /usr/lib/postgresql/15/bin or initdb's on $PATH)")
	redisBin := flag.String("redis", "redis-server", "redis-server binary")
	sessionF := flag.String("session", "", "leasehold Go clients: on (session stream), off (unary batch requests), or empty for the client's default")
	flag.Parse()
	// Make -out before the rounds, not after: a missing folder used to
	// surface only when results.md was written, minutes of rounds later.
	must(os.MkdirAll(*out, 0o755))
	switch *sessionF {
	case "on":
		clientSession = client.SessionOn
	case "off":
		clientSession = client.SessionOff
	case "":
	default:
		log.Fatalf("-session must be on or off, not %q", *sessionF)
	}
	nodes, res, workers, qworkers := ints(*nodesF), ints(*resF), ints(*workersF), ints(*qworkersF)

	dir := *work
	if dir == "" {
		d, err := os.MkdirTemp("", "peers-bench-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	prims := map[string]bool{}
	for _, p := range strings.Split(*primF, ",") {
		switch p = strings.TrimSpace(p); p {
		case primLock, primQueue, primIdem:
			prims[p] = true
		default:
			log.Fatalf("-primitives: %q is not lock, queue or idem", p)
		}
	}
	var pg *pgServer
	var rd *redisServer
	stopPeers := func() {
		if pg != nil {
			pg.stop()
		}
		if rd != nil {
			rd.stop()
		}
	}
	if prims[primQueue] || prims[primIdem] {
		var err error
		if pg, err = startPostgres(*pgBin, dir); err != nil {
			log.Fatal(err)
		}
		if prims[primQueue] {
			if rd, err = startRedis(*redisBin, dir); err != nil {
				stopPeers()
				log.Fatal(err)
			}
		}
	}
	defer stopPeers()
	var results []result
	roundNo := 0
	// Alternate targets, and rotate who goes first, so that a drift in the
	// machine's speed falls on all of them alike.
	rotate := func(order []string) []string {
		k := roundNo % len(order)
		return append(order[k:len(order):len(order)], order[:k]...)
	}
	report := func(res result) {
		fmt.Fprintf(os.Stderr, "%-5s %-32s nodes=%d resources=%-4d workers=%-2d  %8.0f /s  p50 %v  p99 %v  cpu/op node %v client %v  allocs/op node %.0f client %.0f  errors %d%s\n",
			res.Primitive, res.Target, res.Nodes, res.Resources, res.Workers, res.PairsPerS, res.AcquireP50.Round(10*time.Microsecond), res.AcquireP99.Round(10*time.Microsecond),
			res.NodeCPU.Round(time.Microsecond), res.ClientCPU.Round(time.Microsecond), res.NodeAllocs, res.ClientAllocs, res.Errors, orderNote(res))
		if res.FirstError != "" {
			fmt.Fprintf(os.Stderr, "      first error: %s\n", res.FirstError)
		}
		results = append(results, res)
	}
	for _, n := range nodes {
		ndir := filepath.Join(dir, fmt.Sprintf("%dnodes", n))
		if err := os.MkdirAll(ndir, 0o755); err != nil {
			log.Fatal(err)
		}
		var etcd *servers
		var err error
		if prims[primLock] {
			if etcd, err = startEtcd(*etcdBin, ndir, n); err != nil {
				log.Fatal(err)
			}
		}
		lh, err := startLeasehold(*lhBin, ndir, n)
		if err != nil {
			if etcd != nil {
				etcd.stop()
			}
			log.Fatal(err)
		}
		order := []string{targetEtcd, targetOwn, targetShared}
		var base *servers
		if *baseBin != "" {
			bdir := filepath.Join(ndir, "baseline")
			if err := os.MkdirAll(bdir, 0o755); err != nil {
				log.Fatal(err)
			}
			if base, err = startLeasehold(*baseBin, bdir, n); err != nil {
				if etcd != nil {
					etcd.stop()
				}
				lh.stop()
				stopPeers()
				log.Fatal(err)
			}
			order = append(order, targetBaseOwn, targetBaseShared)
		}
		stopAll := func() {
			if etcd != nil {
				etcd.stop()
			}
			lh.stop()
			if base != nil {
				base.stop()
			}
		}
		fatal := func(format string, args ...any) {
			stopAll()
			stopPeers()
			log.Fatalf(format, args...)
		}
		if prims[primLock] {
			for _, r := range res {
				for _, w := range workers {
					sc := scenario{Primitive: primLock, Nodes: n, Resources: r, Workers: w}
					for _, t := range rotate(order) {
						roundNo++
						res, err := runTarget(t, etcd, lh, base, sc, fmt.Sprintf("r%d", roundNo), *warmup, *measure)
						if err != nil {
							fatal("%s, %+v: %v", t, sc, err)
						}
						report(res)
					}
				}
			}
		}
		if prims[primQueue] {
			for _, w := range qworkers {
				sc := scenario{Primitive: primQueue, Nodes: n, Resources: *keys, Workers: w}
				for _, t := range rotate([]string{targetQPostgres, targetQRedis, targetQOwn, targetQShared}) {
					roundNo++
					res, err := runQueue(t, pg, rd, lh, sc, fmt.Sprintf("r%d", roundNo), *warmup, *measure)
					if err != nil {
						fatal("%s, %+v: %v", t, sc, err)
					}
					report(res)
				}
			}
		}
		if prims[primIdem] {
			for _, w := range qworkers {
				sc := scenario{Primitive: primIdem, Nodes: n, Resources: 0, Workers: w}
				for _, t := range rotate([]string{targetIPostgres, targetIOwn, targetIShared}) {
					roundNo++
					res, err := runIdem(t, pg, lh, sc, fmt.Sprintf("r%d", roundNo), *warmup, *measure)
					if err != nil {
						fatal("%s, %+v: %v", t, sc, err)
					}
					report(res)
				}
			}
		}
		stopAll()
	}
	md := markdown(results, *warmup, *measure)
	must(os.WriteFile(filepath.Join(*out, "results.md"), []byte(md), 0o644))
	js, _ := json.MarshalIndent(results, "", "  ")
	must(os.WriteFile(filepath.Join(*out, "results.json"), js, 0o644))
	must(os.WriteFile(filepath.Join(*out, "results.svg"), []byte(plot(results)), 0o644))
	fmt.Print(md)
}

func runTarget(t string, etcd, lh, base *servers, sc scenario, prefix string, warmup, measure time.Duration) (result, error) {
	var lk locker
	var err error
	nodes := map[string]*servers{targetEtcd: etcd, targetOwn: lh, targetShared: lh, targetBaseOwn: base, targetBaseShared: base}[t]
	switch t {
	case targetEtcd:
		lk, err = newEtcdLocker(etcd.endpoints, sc.Workers)
	case targetOwn:
		lk, err = newLeaseholdLocker(lh.endpoints, sc.Workers, false)
	case targetShared:
		lk, err = newLeaseholdLocker(lh.endpoints, sc.Workers, true)
	case targetBaseOwn:
		lk, err = newLeaseholdLocker(base.endpoints, sc.Workers, false)
	case targetBaseShared:
		lk, err = newLeaseholdLocker(base.endpoints, sc.Workers, true)
	}
	if err != nil {
		return result{}, err
	}
	defer lk.close()
	return round(lk, nodes.meter(), sc, t, prefix, warmup, measure), nil
}

// Primitives compared.
const (
	primLock  = "lock"
	primQueue = "queue"
	primIdem  = "idem"
)

func runQueue(t string, pg *pgServer, rd *redisServer, lh *servers, sc scenario, prefix string, warmup, measure time.Duration) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var qt queueTarget
	var err error
	m := lh.meter()
	switch t {
	case targetQPostgres:
		qt, err = newPgQueue(ctx, pg.dsn, "q_"+prefix, sc.Workers)
		m = meter{cpu: pg.cpu}
	case targetQRedis:
		qt, err = newRedisQueue(ctx, rd.addr, "q:"+prefix, sc.Workers)
		m = meter{cpu: rd.cpu}
	case targetQOwn, targetQShared:
		qt, err = newLhQueue(ctx, lh.endpoints, "peers/"+prefix, sc.Workers, t == targetQShared)
	}
	if err != nil {
		return result{}, err
	}
	defer qt.close()
	return queueRound(qt, m, sc, t, warmup, measure), nil
}

func runIdem(t string, pg *pgServer, lh *servers, sc scenario, prefix string, warmup, measure time.Duration) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var it idemTarget
	var err error
	m := lh.meter()
	switch t {
	case targetIPostgres:
		it, err = newPgIdem(ctx, pg.dsn, "idem_"+prefix, sc.Workers)
		m = meter{cpu: pg.cpu}
	case targetIOwn, targetIShared:
		it, err = newLhIdem(lh.endpoints, sc.Workers, t == targetIShared)
	}
	if err != nil {
		return result{}, err
	}
	defer it.close()
	return idemRound(it, m, sc, t, "peers/"+prefix, warmup, measure), nil
}

func orderNote(r result) string {
	if r.Primitive != primQueue {
		return ""
	}
	return fmt.Sprintf("  order violations %d, redelivered %d", r.OrderViolations, r.Redelivered)
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			log.Fatalf("%q is not a list of positive numbers", s)
		}
		out = append(out, n)
	}
	return out
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
