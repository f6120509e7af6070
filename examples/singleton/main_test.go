package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
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

// A leader cut off from the cluster stops its job (its leadership context
// ends at the client's safe deadline) before another instance starts the
// job, and that one starts within the TTL, with a larger token.
func TestCutOffLeaderStopsBeforeTheNextStarts(t *testing.T) {
	tc := testcluster.Start(t, 1)
	const name, ttl = "cron/cut", 3 * time.Second
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	proxy := testcluster.NewProxy(t, strings.TrimPrefix(tc.URL(0), "http://"))

	var mu sync.Mutex
	var aStopped, bStarted time.Time
	var aToken, bToken uint64
	started := make(chan struct{})
	// a's job runs until its leadership ends, like a long batch job.
	aJob := func(ctx context.Context, token uint64) error {
		mu.Lock()
		if aToken == 0 {
			aToken = token
			close(started)
		}
		mu.Unlock()
		<-ctx.Done()
		mu.Lock()
		aStopped = time.Now()
		mu.Unlock()
		return nil
	}
	bJob := func(ctx context.Context, token uint64) error {
		mu.Lock()
		defer mu.Unlock()
		if bStarted.IsZero() {
			bStarted, bToken = time.Now(), token
		}
		return nil
	}
	run := func(url, id string, job Job) {
		c, err := client.New(client.Config{Endpoints: []string{url}, RequestTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); Run(ctx, c, name, id, 50*time.Millisecond, ttl, job, log) }()
		t.Cleanup(func() { cancel(); <-done; c.Close() })
	}
	run(proxy.URL(), "a", aJob)
	select {
	case <-started:
	case <-time.After(15 * time.Second):
		t.Fatal("a did not start leading within 15s")
	}
	run(tc.URL(0), "b", bJob)

	cut := time.Now()
	proxy.Cut()
	deadline := time.Now().Add(ttl + 10*time.Second)
	for {
		mu.Lock()
		done := !bStarted.IsZero()
		mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b did not start the job within %v of a being cut off", ttl+10*time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if aStopped.IsZero() {
		t.Fatalf("a's job was still running when b's started, %v after the cut", bStarted.Sub(cut))
	}
	if !aStopped.Before(bStarted) {
		t.Fatalf("a's job stopped at %v, b's started at %v (after the cut): they overlapped", aStopped.Sub(cut), bStarted.Sub(cut))
	}
	if bToken <= aToken {
		t.Fatalf("b's token %d is not above a's %d", bToken, aToken)
	}
	t.Logf("after the cut: a stopped at %v, b started at %v (TTL %v)", aStopped.Sub(cut).Round(time.Millisecond), bStarted.Sub(cut).Round(time.Millisecond), ttl)
}
