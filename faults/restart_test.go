package faults

import (
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testutil"
)

// failoverTTL outlasts a leader election on a loaded machine: a holder
// renews every TTL/3 and keeps its lease while a renewal gets through
// before its deadline.
const failoverTTL = 6 * time.Second

// TestStoreFailover SIGKILLs the leader of a 3-node cluster while a client
// process holds a lease and writes under it: the new leader restarts the
// lease's countdown from its takeover, the holder's renewals reach it, so
// the holder keeps its lease and its writes go on under the same token;
// afterwards the next token is higher and no acknowledged write is lost.
func TestStoreFailover(t *testing.T) {
	nodes := startCluster(t, 3)
	c := newClient(t, "", urls(nodes)...)
	h := &history{}
	ctx := testutil.Context(t, 2*time.Minute)
	const r = "list/failover"
	holder, err := startWritingClient(t, r, nodes, clientOpts{TTL: failoverTTL, Work: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	o := holder.output()
	h.granted(r, o.leaseID, o.token)
	l, err := leader(nodes, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.p.Kill(); err != nil {
		t.Fatal(err)
	}
	err = holder.waitOutput(progressTimeout, "written 3 more times after the leader died", func(w clientOutput) bool {
		return w.lost != nil || len(w.acks) >= len(o.acks)+3
	})
	if err == nil && holder.output().lost != nil {
		t.Errorf("the holder lost its lease in the failover (%s): a new leader must restart its countdown", holder.output().lost.args[0])
	}
	if err := l.start(); err != nil {
		t.Fatalf("restart %s: %v", l.id, err)
	}
	releaseAndKill(t, holder)
	for _, w := range holder.output().acks {
		h.wrote(w)
	}
	h.nextPhase()
	if err == nil {
		err = regrant(ctx, c, h, "faults/store-failover")
	}
	finish(t, "store-failover", h, c, expect{}, err)
}

// TestLockServiceRestart SIGKILLs the whole service (a single node) and
// starts it again on its data: a live holder keeps its lease across the
// restart (its renewals resume), the lease of a holder that died before
// the restart is not lost either and runs a full TTL from the restart (a
// restarted node restarts every countdown), tokens after the restart are
// above every token before, and no acknowledged write is lost.
func TestLockServiceRestart(t *testing.T) {
	n := startOne(t)
	c := newClient(t, "", n.url)
	h := &history{}
	ctx := testutil.Context(t, 2*time.Minute)
	const live, dead = "list/restart/live", "list/restart/dead"
	holder, err := startWritingClient(t, live, []*node{n}, clientOpts{TTL: failoverTTL, Work: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	gone := startClientProc(t, dead, []string{n.url}, clientOpts{TTL: failoverTTL, Work: "hold", ManualRenew: true})
	if err := gone.waitOutput(progressTimeout, "been granted", func(o clientOutput) bool { return o.token != 0 }); err != nil {
		t.Fatal(err)
	}
	gone.Kill()
	for _, cp := range []*clientProc{holder, gone} {
		o := cp.output()
		h.granted(cp.resource, o.leaseID, o.token)
	}
	o := holder.output()
	if err := n.p.Kill(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	if err := n.start(); err != nil {
		t.Fatal(err)
	}
	next, err := c.Acquire(ctx, dead, client.TTL(listTTL), client.Wait(2*failoverTTL))
	if err != nil {
		t.Fatal(err)
	}
	h.granted(dead, next.ID(), next.Token())
	if lived := time.Since(restarted); lived < failoverTTL {
		t.Errorf("the dead holder's lease ended %v after the restart began: a restart shortened it (TTL %v)", lived, failoverTTL)
	}
	next.Release(ctx)
	err = holder.waitOutput(progressTimeout, "written 3 more times after the restart", func(w clientOutput) bool {
		return w.lost != nil || len(w.acks) >= len(o.acks)+3
	})
	if err == nil && holder.output().lost != nil {
		t.Errorf("the live holder lost its lease across the restart (%s)", holder.output().lost.args[0])
	}
	releaseAndKill(t, holder)
	for _, w := range holder.output().acks {
		h.wrote(w)
	}
	h.nextPhase()
	if err == nil {
		err = regrant(ctx, c, h, "faults/lock-service-restart")
	}
	finish(t, "lock-service-restart", h, c, expect{}, err)
}

// releaseAndKill has a client process release its lease (SIGUSR1), checks
// the release was accepted, and kills the process.
func releaseAndKill(t *testing.T, cp *clientProc) {
	t.Helper()
	defer cp.Kill()
	if err := cp.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if err := cp.waitOutput(progressTimeout, "released", func(o clientOutput) bool { return o.released != nil }); err != nil {
		t.Fatal(err)
	}
	if got := cp.output().released.args[0]; got != "ok" {
		t.Errorf("the holder's release answered %s", got)
	}
}
