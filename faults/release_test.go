package faults

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/internal/testutil"
)

// TestDelayedReleaseAfterRegrant cuts a client process off from the node
// (a proxy between them) while it holds a lease; its lease expires and the
// resource is granted to the next holder; then it releases, and its
// release (retried with its request id until the link heals) reaches the
// node only after the re-grant. It must not end the new holder's lease:
// the node answers not_found, the new holder keeps the resource, renews
// and writes under it.
func TestDelayedReleaseAfterRegrant(t *testing.T) {
	n := startOne(t)
	c := newClient(t, "", n.url)
	h := &history{}
	ctx := testutil.Context(t, time.Minute)
	const r = "list/delayed-release"
	link := testcluster.NewProxy(t, n.apiAddr)
	old := startClientProc(t, r, []string{link.URL()}, clientOpts{TTL: listTTL, Work: "hold"})
	if err := old.waitOutput(progressTimeout, "been granted", func(o clientOutput) bool { return o.token != 0 }); err != nil {
		t.Fatal(err)
	}
	o := old.output()
	h.granted(r, o.leaseID, o.token)
	link.Cut()
	next, err := c.Acquire(ctx, r, client.TTL(time.Minute), client.Wait(30*time.Second), client.ManualRenew())
	if err != nil {
		t.Fatal(err)
	}
	h.granted(r, next.ID(), next.Token())
	if err := old.Signal(syscall.SIGUSR1); err != nil { // release, into the cut link
		t.Fatal(err)
	}
	if err := old.waitOutput(progressTimeout, "begun to release", func(o clientOutput) bool { return o.count("release") > 0 }); err != nil {
		t.Fatal(err)
	}
	link.Heal()
	if err := old.waitOutput(progressTimeout, "had its release answered", func(o clientOutput) bool { return o.released != nil }); err != nil {
		t.Fatal(err)
	}
	if got := old.output().released.args[0]; got != "not_found" {
		t.Errorf("the delayed release was answered %q, want not_found (its lease had expired)", got)
	}
	info, err := c.Get(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if info.Holder == nil || info.Holder.ID != next.ID() {
		t.Fatalf("after the delayed release %s is held by %+v, want the new holder's lease %d", r, info.Holder, next.ID())
	}
	if err := next.Renew(ctx); err != nil {
		t.Errorf("the new holder cannot renew after the delayed release: %v", err)
	}
	if err := putFenced(ctx, c, h, r+"/next", []byte("next"), r, next.Token()); err != nil {
		t.Errorf("the new holder cannot write after the delayed release: %v", err)
	}
	next.Release(context.WithoutCancel(ctx))
	finish(t, "delayed-release-after-regrant", h, c, expect{}, nil)
}

// TestForcedReleaseWithActiveWorker force-releases (the CLI, as an
// operator would) the lease of a client process that keeps writing under
// it: the fence cuts its writes at once, at the log index of the forced
// release, without waiting for a new holder to write; the worker learns at
// its next renewal that its lease is gone; the next grant's token is higher.
func TestForcedReleaseWithActiveWorker(t *testing.T) {
	n := startOne(t)
	c := newClient(t, "", n.url)
	h := &history{}
	ctx := testutil.Context(t, time.Minute)
	const r = "list/forced"
	const ttl = 3 * time.Second
	worker, err := startWritingClient(t, r, []*node{n}, clientOpts{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	o := worker.output()
	h.granted(r, o.leaseID, o.token)
	forcedAt := monoNow()
	if _, err := runLH(30*time.Second, "--endpoints", n.url, "force-release", r, "--lease", strconv.FormatUint(o.leaseID, 10),
		"--reason", "fault suite: forced release with an active worker", "--yes"); err != nil {
		t.Fatal(err)
	}
	recs, _, err := c.Audit(ctx, 0, 1)
	if err != nil || len(recs) != 1 || recs[0].LeaseID != o.leaseID {
		t.Fatalf("audit record of the forced release: %v %+v", err, recs)
	}
	forced := recs[0].Index
	before := worker.output()
	err = worker.waitOutput(progressTimeout, "written 3 times after the forced release, and lost its lease", func(w clientOutput) bool {
		return w.lost != nil && len(w.acks)+w.refused >= len(before.acks)+before.refused+3
	})
	worker.Kill()
	w := worker.output()
	for _, wr := range w.acks {
		h.wrote(wr)
		if wr.Version > forced {
			t.Errorf("the worker's write %s was applied at %d, after the forced release at %d", wr.Key, wr.Version, forced)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Duration(w.lost.mono - forcedAt); took > ttl/3+2*time.Second {
		t.Errorf("the worker reported its lease lost %v after the forced release; it renews every %v", took, ttl/3)
	}
	next, err := c.Acquire(ctx, r, client.TTL(listTTL))
	if err != nil {
		t.Fatalf("the resource after the forced release: %v", err)
	}
	h.granted(r, next.ID(), next.Token())
	next.Release(ctx)
	finish(t, "forced-release-with-active-worker", h, c, expect{}, nil)
}
