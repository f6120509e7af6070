package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testcluster"
)

// runs records each run of the job: who ran it, with which token.
type runs struct {
	mu  sync.Mutex
	all []run
}

type run struct {
	id    string
	token uint64
}

func (r *runs) job(id string) Job {
	return func(ctx context.Context, token uint64) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.all = append(r.all, run{id, token})
		return nil
	}
}

func (r *runs) snapshot() []run {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]run(nil), r.all...)
}

// waitFor polls until ok holds on the runs so far, or fails at the deadline.
func (r *runs) waitFor(t *testing.T, timeout time.Duration, what string, ok func([]run) bool) []run {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := r.snapshot()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v; runs: %+v", what, timeout, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Three instances: only the leader runs the job; when it stops, another
// takes over with a larger token, and the old leader's fenced write is
// refused.
func TestOneInstanceRunsTheJob(t *testing.T) {
	tc := testcluster.Start(t, 1)
	const name = "cron/report"
	var r runs
	type instance struct {
		c      *client.Client
		cancel context.CancelFunc
		done   chan struct{}
	}
	instances := map[string]*instance{}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, id := range []string{"a", "b", "c"} {
		c, err := client.New(client.Config{Endpoints: []string{tc.URL(0)}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		in := &instance{c: c, cancel: cancel, done: make(chan struct{})}
		instances[id] = in
		go func() {
			defer close(in.done)
			Run(ctx, c, name, id, 50*time.Millisecond, 5*time.Second, r.job(id), log)
		}()
		t.Cleanup(func() { cancel(); <-in.done; c.Close() })
	}

	first := r.waitFor(t, 15*time.Second, "five runs", func(s []run) bool { return len(s) >= 5 })[0]
	for _, x := range r.snapshot() {
		if x != first {
			t.Fatalf("two instances ran the job while %+v led: %+v", first, r.snapshot())
		}
	}

	// Stop the leader (it resigns): another instance runs the job, with a
	// larger token, well before the leader's TTL would have run out.
	leader := instances[first.id]
	stopped := time.Now()
	leader.cancel()
	<-leader.done
	before := len(r.snapshot())
	next := r.waitFor(t, 15*time.Second, "run by another instance", func(s []run) bool {
		return len(s) > before && s[len(s)-1].id != first.id
	})
	took := time.Since(stopped)
	last := next[len(next)-1]
	if last.token <= first.token {
		t.Fatalf("the next leader's token %d is not above the first's %d", last.token, first.token)
	}
	for _, x := range next[before:] {
		if x.id == first.id {
			t.Fatalf("the stopped instance ran the job after it stopped: %+v", next)
		}
	}
	t.Logf("hand-over after a clean stop: %v (TTL 5s)", took)

	// The old leader's token is stale at the fenced write.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := recordRun(leader.c, name, last.id)(ctx, last.token); err != nil {
		t.Fatalf("a fenced write with the current token %d: %v", last.token, err)
	}
	err := recordRun(leader.c, name, first.id)(ctx, first.token)
	if !errors.Is(err, leasehold.ErrStaleToken) {
		t.Fatalf("the old leader's fenced write (token %d): %v, want %v", first.token, err, leasehold.ErrStaleToken)
	}
}
