package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testcluster"
)

// newClient is a client of cluster node i (followers forward to the
// leader, so writers on different nodes race like writers on different
// hosts).
func newClient(t *testing.T, tc *testcluster.Cluster, i int) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{Endpoints: []string{tc.URL(i)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Writers on every node increment one counter at once: every increment
// counts, none is lost to a concurrent writer.
func TestConcurrentIncrementsLoseNothing(t *testing.T) {
	tc := testcluster.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const writers, each = 6, 15
	var wg sync.WaitGroup
	attempts := make([]int, writers)
	errs := make(chan error, writers)
	for w := range writers {
		c := newClient(t, tc, w%tc.Size())
		wg.Go(func() {
			for range each {
				a, err := Increment(ctx, c, "counters/visits")
				attempts[w] += a
				if err != nil {
					errs <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n, _, err := read(ctx, newClient(t, tc, 0), "counters/visits")
	if err != nil {
		t.Fatal(err)
	}
	if n != writers*each {
		t.Fatalf("counter is %d after %d increments: %d lost", n, writers*each, writers*each-int(n))
	}
	total := 0
	for _, a := range attempts {
		total += a
	}
	t.Logf("%d increments by %d concurrent writers took %d attempts (%d conflicts retried)", n, writers, total, total-int(n))
}

// A write based on a version someone has since replaced is refused, so
// the writer that read too early cannot overwrite the newer value.
func TestStaleWriteIsRefused(t *testing.T) {
	tc := testcluster.Start(t, 1)
	c := newClient(t, tc, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := Increment(ctx, c, "counters/x"); err != nil {
		t.Fatal(err)
	}
	_, seen, err := read(ctx, c, "counters/x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Increment(ctx, c, "counters/x"); err != nil { // another writer, in between
		t.Fatal(err)
	}
	_, err = c.Put(ctx, "counters/x", []byte("2"), client.IfVersion(seen))
	if !errors.Is(err, leasehold.ErrVersionMismatch) {
		t.Fatalf("a write at the old version %d: %v, want %v", seen, err, leasehold.ErrVersionMismatch)
	}
	if n, _, _ := read(ctx, c, "counters/x"); n != 2 {
		t.Fatalf("counter is %d, want 2", n)
	}
}

// Concurrent transfers between three accounts: money is neither made nor
// lost, no balance goes below zero, and an overdraft is refused.
func TestTransfersKeepTheTotal(t *testing.T) {
	tc := testcluster.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	accounts := []string{"accounts/a", "accounts/b", "accounts/c"}
	setup := newClient(t, tc, 0)
	for _, a := range accounts {
		if _, err := setup.Put(ctx, a, []byte("100"), client.IfVersion(0)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(accounts))
	for w := range accounts {
		c := newClient(t, tc, 0)
		wg.Go(func() {
			for i := range 12 {
				from, to := accounts[(w+i)%3], accounts[(w+i+1)%3]
				if _, err := Transfer(ctx, c, from, to, int64(1+i%7)); err != nil && !errors.Is(err, ErrInsufficient) {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var sum int64
	for _, a := range accounts {
		n, _, err := read(ctx, setup, a)
		if err != nil {
			t.Fatal(err)
		}
		if n < 0 {
			t.Errorf("%s went below zero: %d", a, n)
		}
		sum += n
	}
	if sum != 300 {
		t.Fatalf("the accounts hold %d in all after the transfers, want 300", sum)
	}
	if _, err := Transfer(ctx, setup, "accounts/a", "accounts/b", 1000); !errors.Is(err, ErrInsufficient) {
		t.Fatalf("an overdraft: %v, want %v", err, ErrInsufficient)
	}
}
