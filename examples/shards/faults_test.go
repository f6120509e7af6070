package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/procs"
	"github.com/leasehold/leasehold/internal/testutil"
)

const (
	group      = "shards"
	partitions = 16
	// ttl is roomy for a loaded machine: renewals every ttl/3.
	ttl = 3 * time.Second
	// handOffBound is the bound on a partition's hand-off after
	// its owner's loss.
	handOffBound = ttl + time.Second
)

// env is a cluster, a database and the workers of one test.
type env struct {
	t       *testing.T
	dir     string
	nodes   []*procs.ServeNode
	eps     string
	dsn     string
	c       *client.Client
	workers map[string]*workerProc
}

// workerProc is a shards worker process and its ownership log.
type workerProc struct {
	*procs.Proc
	log string
}

func newEnv(t *testing.T) *env {
	if testing.Short() {
		t.Skip("starts a 3-node cluster and worker processes")
	}
	if pg.Err() != nil {
		t.Fatalf("no Postgres: %v", pg.Err())
	}
	e := &env{t: t, dir: t.TempDir(), dsn: pg.NewDatabase(t), workers: map[string]*workerProc{}}
	e.nodes = procs.StartServeCluster(t, leaseholdBin, e.dir)
	var urls []string
	for _, n := range e.nodes {
		urls = append(urls, n.URL)
	}
	e.eps = strings.Join(urls, ",")
	c, err := client.New(client.Config{Endpoints: urls})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	e.c = c
	if _, err := c.CreateGroup(testutil.Context(t, 30*time.Second), group, partitions); err != nil {
		t.Fatalf("create group: %v", err)
	}
	return e
}

func (e *env) start(member string, environ ...string) *workerProc {
	e.t.Helper()
	log := filepath.Join(e.dir, member+".own")
	p, err := procs.Start(e.t, e.dir, member, procs.ChildEnv(environ...), workerBin, "--member", member, "--dsn", e.dsn,
		"--endpoints", e.eps, "--group", group, "--ttl", ttl.String(), "--log", log)
	if err != nil {
		e.t.Fatal(err)
	}
	w := &workerProc{Proc: p, log: log}
	e.workers[member] = w
	return w
}

// settled waits until every partition has an owner, none is being
// revoked, and members is the group's member count.
func (e *env) settled(members int, within time.Duration) {
	e.t.Helper()
	testutil.Eventually(e.t, within, fmt.Sprintf("every partition owned by one of %d members, no revocation pending", members), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		g, err := e.c.Group(ctx, group)
		return err == nil && g.Unowned == 0 && g.PendingRevocations == 0 && g.Members == members
	})
}

// ownership reads every worker's log.
func (e *env) ownership() ownership {
	var paths []string
	for _, w := range e.workers {
		paths = append(paths, w.log)
	}
	o, err := readOwnership(paths...)
	if err != nil {
		e.t.Fatal(err)
	}
	return o
}

// term is the cluster's raft term: the largest any node reports.
func (e *env) term() uint64 {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := e.c.ClusterStatus(ctx)
	if err != nil {
		e.t.Fatalf("cluster status: %v", err)
	}
	var t uint64
	for _, n := range st {
		t = max(t, n.Term)
	}
	return t
}

// handOffs is, for each partition member held at lost, how long after
// lost another member started it; it fails the test past handOffBound.
// A leader change in between (term, the term at the loss, is no longer
// the cluster's) restarts every session's countdown at the takeover
// (invariant 5), so the bound is then a TTL longer.
func (e *env) handOffs(member string, lost time.Time, term uint64) []time.Duration {
	e.t.Helper()
	bound := handOffBound
	if now := e.term(); now != term {
		bound += ttl
		e.t.Logf("the raft term moved from %d to %d during %s's hand-off (a leader change on a loaded machine): its bound is %v", term, now, member, bound)
	}
	o := e.ownership()
	held := o.heldAt(member, lost)
	if len(held) == 0 {
		e.t.Fatalf("%s held no partition when it was lost", member)
	}
	var out []time.Duration
	for _, p := range held {
		at, ok := o.takenOver(p, member, lost)
		if !ok {
			e.t.Errorf("partition %d of %s was never owned again after %s's loss", p, member, member)
			continue
		}
		d := at.Sub(lost)
		if d > bound {
			e.t.Errorf("partition %d of %s owned again %v after its loss, over the bound %v", p, member, d, bound)
		}
		out = append(out, d)
	}
	return out
}

// waitHandedOff waits until every partition member held at lost is owned
// by another member (by the workers' logs).
func (e *env) waitHandedOff(member string, lost time.Time) {
	e.t.Helper()
	testutil.Eventually(e.t, handOffBound+10*time.Second, "the partitions of "+member+" owned by others", func() bool {
		o := e.ownership()
		for _, p := range o.heldAt(member, lost) {
			if _, ok := o.takenOver(p, member, lost); !ok {
				return false
			}
		}
		return true
	})
}

// refusedWithin waits up to d for the fence to refuse a write of member
// to shard, by the member's log.
func (e *env) refusedWithin(member string, shard int, d time.Duration) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, r := range e.ownership().refused {
			if r.Member == member && r.Partition == shard {
				return true
			}
		}
	}
	return false
}

// writes reads the accepted writes in commit order: per shard, the epochs.
func (e *env) writes() (map[int][]uint64, int) {
	ctx := testutil.Context(e.t, 10*time.Second)
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT shard, epoch FROM shard_writes ORDER BY id")
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[int][]uint64{}
	n := 0
	for rows.Next() {
		var shard int
		var epoch int64
		if err := rows.Scan(&shard, &epoch); err != nil {
			e.t.Fatal(err)
		}
		out[shard] = append(out[shard], uint64(epoch))
		n++
	}
	return out, n
}

// The shards workers under faults: a member SIGSTOPped inside a write past
// its TTL and resumed (its write refused by the epoch fence), a member
// SIGKILLed, members added and removed under load, and the cluster's
// leader SIGKILLed. Afterwards no partition was ever held by two members
// at once (by the workers' own client deadlines), every accepted write
// carried an epoch no older than the one before it on its shard, and
// every partition was owned again within TTL + 1s of its owner's loss.
func TestShardsUnderFaults(t *testing.T) {
	e := newEnv(t)
	mark := filepath.Join(e.dir, "stalled")
	e.start("w1", envStallMark+"="+mark)
	for _, m := range []string{"w2", "w3", "w4"} {
		e.start(m)
	}
	e.settled(4, 60*time.Second)

	// 1. w1 stalls just before a write; SIGSTOP it there, past its TTL.
	if err := os.WriteFile(mark+".arm", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "w1 reaches its stall point", func() bool {
		_, err := os.Stat(mark)
		return err == nil
	})
	b, _ := os.ReadFile(mark)
	stalledShard, _ := strconv.Atoi(string(b))
	stopTerm, stoppedAt := e.term(), time.Now()
	if err := e.workers["w1"].Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	e.waitHandedOff("w1", stoppedAt)
	// The next owner writes with its epoch before w1 wakes up.
	testutil.Eventually(t, 20*time.Second, "the stalled shard is written by its next owner", func() bool {
		w, _ := e.writes()
		eps := w[stalledShard]
		return len(eps) > 0 && eps[len(eps)-1] > maxEpoch(e.ownership(), "w1", stalledShard)
	})
	if err := os.WriteFile(mark+".release", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := e.workers["w1"].Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Not fatal: without the fence the write goes through, and the checks
	// below say what it did.
	if !e.refusedWithin("w1", stalledShard, 20*time.Second) {
		t.Errorf("w1's write to shard %d with its old epoch was not refused by the fence within 20s", stalledShard)
	}
	stopHandOffs := e.handOffs("w1", stoppedAt, stopTerm)
	e.settled(4, 30*time.Second) // w1 joined again

	// 2. SIGKILL w2.
	killTerm, killedAt := e.term(), time.Now()
	if err := e.workers["w2"].Kill(); err != nil {
		t.Fatal(err)
	}
	e.waitHandedOff("w2", killedAt)
	killHandOffs := e.handOffs("w2", killedAt, killTerm)
	e.settled(3, 30*time.Second)

	// 3. Under load, two members join and one leaves (SIGTERM: it stops
	// its work, then leaves).
	e.start("w5")
	e.start("w6")
	if err := e.workers["w3"].Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !e.workers["w3"].Wait(30 * time.Second) {
		t.Fatal("w3 did not exit within 30s of SIGTERM")
	}
	e.settled(4, 30*time.Second)

	// 4. SIGKILL the leader; the members keep or regain their partitions.
	old := leaderOf(t, e.nodes, e.c)
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	if n := leaderOf(t, e.nodes, e.c); n == old {
		t.Fatalf("%s still leads after its SIGKILL", old.ID)
	}
	e.settled(4, 30*time.Second)
	_, before := e.writes()
	testutil.Eventually(t, 20*time.Second, "writes go on after the leader's kill", func() bool {
		_, n := e.writes()
		return n > before+partitions
	})

	// Stop the workers, then look at what happened.
	for _, w := range e.workers {
		w.Signal(syscall.SIGTERM)
	}
	for name, w := range e.workers {
		if !w.Wait(30 * time.Second) {
			t.Errorf("%s did not exit within 30s of SIGTERM", name)
		}
	}
	o := e.ownership()
	for _, v := range o.overlaps() {
		t.Error("two owners at once: " + v)
	}
	w, n := e.writes()
	for shard, eps := range w {
		for i := 1; i < len(eps); i++ {
			if eps[i] < eps[i-1] {
				t.Errorf("shard %d: a write with epoch %d was accepted after one with epoch %d", shard, eps[i], eps[i-1])
			}
		}
	}
	if len(w) != partitions {
		t.Errorf("writes reached %d shards of %d", len(w), partitions)
	}
	t.Logf("%d intervals, %d accepted writes, %d refused; hand-offs after SIGSTOP %v, after SIGKILL %v (bound %v)",
		len(o.intervals), n, len(o.refused), sorted(stopHandOffs), sorted(killHandOffs), handOffBound)
}

// maxEpoch is the largest epoch member held partition with.
func maxEpoch(o ownership, member string, partition int) uint64 {
	var m uint64
	for _, iv := range o.intervals {
		if iv.member == member && iv.partition == partition {
			m = max(m, iv.epoch)
		}
	}
	return m
}

func sorted(ds []time.Duration) []time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	for i := range ds {
		ds[i] = ds[i].Round(time.Millisecond)
	}
	return ds
}
