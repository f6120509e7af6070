package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
)

// closeTTL is far longer than any test here runs: a resource free after
// Close was given back, not expired.
const closeTTL = time.Minute

// TestCloseGivesBackWhatItHolds: Close releases a lease, a semaphore slot
// and a leadership and leaves a group session, so waiters of another
// client get them at once (their TTL is a minute); each ends with
// ErrReleased. A campaign of the closing client still waiting ends with
// ErrClosed. Close, from several goroutines at once and again after,
// returns nil; every call after it fails with ErrClosed.
func TestCloseGivesBackWhatItHolds(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c, other := nodeClient(t, n), nodeClient(t, n)
	ctx := ctxFor(t, 30*time.Second)

	lock, err := c.Acquire(ctx, "close/lock", client.TTL(closeTTL))
	if err != nil {
		t.Fatal(err)
	}
	work := lock.Context(ctx)
	slot, err := c.Acquire(ctx, "close/sem", client.TTL(closeTTL), client.Semaphore(1))
	if err != nil {
		t.Fatal(err)
	}
	leader, err := c.Campaign(ctx, "close/elect", "closing", client.TTL(closeTTL))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateGroup(ctx, "close-group", 2); err != nil {
		t.Fatal(err)
	}
	member, err := c.Join(ctx, "close-group", "m", client.TTL(closeTTL))
	if err != nil {
		t.Fatal(err)
	}

	// Waiters of another client, and a campaign of the closing one.
	got := make(chan string, 3)
	var wg sync.WaitGroup
	defer wg.Wait()
	waitFor := func(what string, take func() (func(context.Context) error, error)) {
		wg.Go(func() {
			release, err := take()
			if err != nil {
				t.Errorf("%s: %v", what, err)
				got <- ""
				return
			}
			defer release(ctxFor(t, callTimeout))
			got <- what
		})
	}
	waitFor("lock", func() (func(context.Context) error, error) {
		l, err := other.Acquire(ctx, "close/lock", client.Wait(20*time.Second))
		return releaseOf(l), err
	})
	waitFor("slot", func() (func(context.Context) error, error) {
		l, err := other.Acquire(ctx, "close/sem", client.Semaphore(1), client.Wait(20*time.Second))
		return releaseOf(l), err
	})
	waitFor("leadership", func() (func(context.Context) error, error) {
		l, err := other.Campaign(ctx, "close/elect", "next", client.Wait(20*time.Second))
		if err != nil {
			return nil, err
		}
		return l.Resign, nil
	})
	campaign := make(chan error, 1)
	go func() {
		_, err := c.Campaign(ctx, "close/elect", "second", client.Wait(20*time.Second))
		campaign <- err
	}()
	eventually(t, 10*time.Second, "every waiter is in line", func() bool {
		e, err := other.Leader(ctx, "close/elect")
		return err == nil && e.Candidates >= 2 && len(get(t, other, "close/lock").Waiters) == 1
	})

	start := time.Now()
	var closers sync.WaitGroup
	for range 4 {
		closers.Go(func() {
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	closers.Wait()
	if err := c.Close(); err != nil {
		t.Fatalf("Close again: %v", err)
	}
	for range 3 {
		select {
		case what := <-got:
			if what != "" {
				t.Logf("%s taken %v after Close began", what, time.Since(start).Round(time.Millisecond))
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a waiter did not get what the closed client held within 5s (its TTL is a minute)")
		}
	}
	again, err := other.Join(ctx, "close-group", "m", client.TTL(time.Second))
	if err != nil {
		t.Fatalf("Join as the member the closed client was: %v (its session should be gone)", err)
	}
	if err := again.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-campaign; !errors.Is(err, client.ErrClosed) {
		t.Fatalf("a campaign waiting when Close began: %v, want ErrClosed", err)
	}

	for what, err := range map[string]error{"lock": lock.Err(), "slot": slot.Err(), "leadership": leader.Err(), "membership": member.Err()} {
		if !errors.Is(err, client.ErrReleased) {
			t.Errorf("%s Err after Close = %v, want ErrReleased", what, err)
		}
	}
	<-work.Done()
	if !errors.Is(context.Cause(work), client.ErrReleased) {
		t.Fatalf("lease Context cause %v, want ErrReleased", context.Cause(work))
	}

	if _, err := c.Get(ctx, "close/lock"); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Get after Close: %v, want ErrClosed", err)
	}
	if l2, err := c.Acquire(ctx, "close/new"); !errors.Is(err, client.ErrClosed) {
		if l2 != nil {
			l2.Release(ctx)
		}
		t.Fatalf("Acquire after Close: %v, want ErrClosed", err)
	}
	if h := get(t, other, "close/new").Holder; h != nil {
		t.Fatalf("an Acquire after Close took close/new: lease %d", h.ID)
	}
}

// releaseOf is l's Release, or nil for no lease.
func releaseOf(l *client.Lease) func(context.Context) error {
	if l == nil {
		return nil
	}
	return l.Release
}

// TestCloseLeaveHeld: with LeaveHeld, Close stops renewal and ends the
// lease locally at once (Done, Context, Err matching ErrLeaseLost and
// ErrClosed) but does not give it back: the server holds it until its TTL.
func TestCloseLeaveHeld(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c, other := nodeClient(t, n), nodeClient(t, n)
	ctx := ctxFor(t, 30*time.Second)
	const ttl = 2 * time.Second
	l, err := c.Acquire(ctx, "close/leave", client.TTL(ttl), client.ProgressTimeout(0))
	if err != nil {
		t.Fatal(err)
	}
	work := l.Context(ctx)
	if err := c.CloseContext(ctx, client.LeaveHeld()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closed := time.Now()
	if !isDone(l) {
		t.Fatal("a lease still held is not done when Close returns")
	}
	if m := missing(l.Err(), client.ErrLeaseLost, client.ErrClosed); len(m) > 0 {
		t.Fatalf("lease Err %v does not match %v", l.Err(), m)
	}
	<-work.Done()
	if m := missing(context.Cause(work), client.ErrLeaseLost, client.ErrClosed); len(m) > 0 {
		t.Fatalf("lease Context cause %v does not match %v", context.Cause(work), m)
	}
	if h := get(t, other, "close/leave").Holder; h == nil || h.ID != l.ID() {
		t.Fatalf("holder right after Close with LeaveHeld: %v, want lease %d", h, l.ID())
	}
	eventually(t, 15*time.Second, "close/leave expires on the server", func() bool {
		return get(t, other, "close/leave").Holder == nil
	})
	// Nothing renewed it after Close: it lasted about one TTL more.
	if held := time.Since(closed); held > ttl+2*time.Second {
		t.Fatalf("held %v after Close, want about its TTL %v", held, ttl)
	}
	if err := l.Release(ctx); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Release after Close: %v, want ErrClosed", err)
	}
}

// TestCloseAgainstDeadNodeIsBounded: with the node unreachable (a black
// hole), Close returns within CloseTimeout, says how many leases it left
// to expire, and ends them locally with ErrLeaseLost and ErrClosed.
func TestCloseAgainstDeadNodeIsBounded(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	sd := &switchDialer{}
	sd.set(n.URL)
	tr := &http.Transport{DialContext: sd.dial}
	t.Cleanup(tr.CloseIdleConnections)
	const bound = 500 * time.Millisecond
	c := newClient(t, client.Config{CloseTimeout: bound, HTTPClient: &http.Client{Transport: tr}, Session: client.SessionOff},
		"http://localhost")
	ctx := ctxFor(t, callTimeout)
	var leases []*client.Lease
	for _, r := range []string{"close/dead/a", "close/dead/b"} {
		l, err := c.Acquire(ctx, r, client.TTL(closeTTL))
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	sd.set("http://" + blackHole(t))
	tr.CloseIdleConnections()

	start := time.Now()
	err := c.Close()
	took := time.Since(start)
	if took > bound+time.Second {
		t.Fatalf("Close against a dead node took %v, bound %v", took, bound)
	}
	if err == nil || !strings.Contains(err.Error(), "0 of 2") || !strings.Contains(err.Error(), "left to expire") {
		t.Fatalf("Close = %v, want it to say both leases are left to expire", err)
	}
	for _, l := range leases {
		if m := missing(l.Err(), client.ErrLeaseLost, client.ErrClosed); len(m) > 0 {
			t.Fatalf("lease Err %v does not match %v", l.Err(), m)
		}
	}
	if again := c.Close(); again == nil || again.Error() != err.Error() {
		t.Fatalf("Close again = %v, want the first call's %v", again, err)
	}
	// The node itself still holds them (until their TTL).
	if h := get(t, nodeClient(t, n), "close/dead/a").Holder; h == nil {
		t.Fatal("close/dead/a is free though Close could not reach the node")
	}
}
