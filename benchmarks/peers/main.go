// Command peers runs the same lock workload against etcd and leasehold on
// this machine, alternating targets, and writes a Markdown table, a JSON
// file and an SVG plot of pairs per second, acquire latency and the ratio
// of each leasehold client shape to etcd.
//
// Workers loop {acquire a random one of N resources, release} with an
// empty critical section: etcd through concurrency.Mutex (one shared
// clientv3, one session per worker), leasehold through its Go client (one
// client per worker, and one client shared by all workers). run.sh
// installs etcd and builds leasehold; see docs/benchmarks.md.
package main

import (
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
	nodes, res, workers := ints(*nodesF), ints(*resF), ints(*workersF)

	dir := *work
	if dir == "" {
		d, err := os.MkdirTemp("", "peers-bench-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	var results []result
	roundNo := 0
	for _, n := range nodes {
		ndir := filepath.Join(dir, fmt.Sprintf("%dnodes", n))
		if err := os.MkdirAll(ndir, 0o755); err != nil {
			log.Fatal(err)
		}
		etcd, err := startEtcd(*etcdBin, ndir, n)
		if err != nil {
			log.Fatal(err)
		}
		lh, err := startLeasehold(*lhBin, ndir, n)
		if err != nil {
			etcd.stop()
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
				etcd.stop()
				lh.stop()
				log.Fatal(err)
			}
			order = append(order, targetBaseOwn, targetBaseShared)
		}
		stopAll := func() {
			etcd.stop()
			lh.stop()
			if base != nil {
				base.stop()
			}
		}
		for _, r := range res {
			for _, w := range workers {
				sc := scenario{Nodes: n, Resources: r, Workers: w}
				// Alternate targets, and rotate who goes first, so that a
				// drift in the machine's speed falls on all of them alike.
				k := roundNo % len(order)
				for _, t := range append(order[k:len(order):len(order)], order[:k]...) {
					roundNo++
					res, err := runTarget(t, etcd, lh, base, sc, fmt.Sprintf("r%d", roundNo), *warmup, *measure)
					if err != nil {
						stopAll()
						log.Fatalf("%s, %+v: %v", t, sc, err)
					}
					fmt.Fprintf(os.Stderr, "%-30s nodes=%d resources=%-4d workers=%-2d  %8.0f pairs/s  p50 %v  p99 %v  cpu/pair node %v client %v  errors %d\n",
						t, n, r, w, res.PairsPerS, res.AcquireP50.Round(10*time.Microsecond), res.AcquireP99.Round(10*time.Microsecond),
						res.NodeCPU.Round(time.Microsecond), res.ClientCPU.Round(time.Microsecond), res.Errors)
					results = append(results, res)
				}
			}
		}
		stopAll()
	}
	md := markdown(results, order(results), *warmup, *measure)
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
	return round(lk, nodes.cpu, sc, t, prefix, warmup, measure), nil
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
