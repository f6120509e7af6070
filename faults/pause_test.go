package faults

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testutil"
)

// TestPauseLongerThanLease stops a client process that holds a lease and
// writes under it (SIGSTOP: a GC pause, swap, a VM migration) until its
// lease expired and the next holder has written; when it wakes, its client
// reports the lease lost, and every write it goes on sending with its old
// token is refused at the fence.
func TestPauseLongerThanLease(t *testing.T) {
	n := startOne(t)
	c := newClient(t, "", n.url)
	h := &history{}
	ctx := testutil.Context(t, time.Minute)
	const r = "list/pause"
	paused, err := startWritingClient(t, r, []*node{n}, clientOpts{TTL: listTTL})
	if err != nil {
		t.Fatal(err)
	}
	if err := paused.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	o := paused.output()
	h.granted(r, o.leaseID, o.token)
	next, err := c.Acquire(ctx, r, client.TTL(time.Minute), client.Wait(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	h.granted(r, next.ID(), next.Token())
	if err := putFenced(ctx, c, h, r+"/next", []byte("next"), r, next.Token()); err != nil {
		t.Fatal(err)
	}
	if err := paused.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	err = paused.waitOutput(progressTimeout, "reported its lease lost and written 3 times after waking", func(w clientOutput) bool {
		return w.lost != nil && len(w.acks)+w.refused >= len(o.acks)+o.refused+3
	})
	paused.Kill()
	for _, w := range paused.output().acks {
		h.wrote(w) // one applied after the new grant counts as stale
	}
	next.Release(context.WithoutCancel(ctx))
	finish(t, "pause-longer-than-lease", h, c, expect{}, err)
}

// resumeAfter is how long TestResumeAfterLongStop keeps its client stopped:
// many TTLs, during which two other holders come and go.
var resumeAfter = time.Duration(rounds(4, 30)) * time.Second

// TestResumeAfterLongStop stops a worker process for many TTLs, while two
// other holders take the resource in turn and the last gives it back:
// when the worker resumes it finds out at once that its lease is gone (its
// deadline passed long ago, so it does not even try to renew) and stops
// its work before it sends another write, though nobody holds the
// resource now; the writes it made before the stop were all in its lease.
func TestResumeAfterLongStop(t *testing.T) {
	n := startOne(t)
	c := newClient(t, "", n.url)
	h := &history{}
	ctx := testutil.Context(t, time.Minute+resumeAfter)
	const r = "list/resume"
	worker, err := startWritingClient(t, r, []*node{n}, clientOpts{TTL: listTTL, Work: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	o := worker.output()
	h.granted(r, o.leaseID, o.token)
	for i := range 2 {
		l, err := c.Acquire(ctx, r, client.TTL(listTTL), client.Wait(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		h.granted(r, l.ID(), l.Token())
		if err := putFenced(ctx, c, h, r+"/other/"+string(rune('a'+i)), []byte("other"), r, l.Token()); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Until(stopped.Add(resumeAfter))) // the fault's length, not a wait for an event
	woke := monoNow()
	if err := worker.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	err = worker.waitOutput(progressTimeout, "reported its lease lost", func(w clientOutput) bool { return w.lost != nil })
	if err != nil {
		t.Fatal(err)
	}
	w := worker.output()
	if took := time.Duration(w.lost.mono - woke); took > time.Second {
		t.Errorf("the worker reported its lease lost %v after it resumed", took)
	}
	for _, wr := range w.acks {
		h.wrote(wr) // one applied after the next grant counts as stale
	}
	worker.Kill()
	finish(t, "resume-after-long-stop", h, c, expect{}, nil)
}
