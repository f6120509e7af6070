package client_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// Sixteen goroutines call Idempotent with one key at once: the function
// runs exactly once, and every caller gets its result.
func TestIdempotentRunsOnceForConcurrentCallers(t *testing.T) {
	c := nodeClient(t, startNode(t))
	ctx := ctxFor(t, time.Minute)
	var runs atomic.Int32
	release := make(chan struct{})
	fn := func(ctx context.Context, token uint64) ([]byte, error) {
		runs.Add(1)
		<-release // hold the attempt until every caller has begun
		return []byte("charged once"), nil
	}
	var wg sync.WaitGroup
	results := make([][]byte, 16)
	errs := make([]error, 16)
	for i := range results {
		wg.Go(func() {
			results[i], errs[i] = client.Idempotent(ctx, c.Client, "pay/42", []byte("amount=10"), fn,
				client.WaitFor(30*time.Second))
		})
	}
	eventually(t, 10*time.Second, "one attempt starts", func() bool { return runs.Load() == 1 })
	time.Sleep(100 * time.Millisecond) // the others are waiting now (they may not run fn)
	close(release)
	wg.Wait()
	if n := runs.Load(); n != 1 {
		t.Fatalf("the function ran %d times", n)
	}
	for i := range results {
		if errs[i] != nil || string(results[i]) != "charged once" {
			t.Fatalf("caller %d got %q, %v", i, results[i], errs[i])
		}
	}
}

// A failed run abandons its attempt, so a retry runs again at once; a key
// in progress without a wait is ErrInProgress; another payload is
// ErrFingerprintMismatch.
func TestIdempotentErrors(t *testing.T) {
	c := nodeClient(t, startNode(t))
	ctx := ctxFor(t, time.Minute)
	boom := errors.New("card declined by a flaky gateway")
	_, err := client.Idempotent(ctx, c.Client, "pay/7", []byte("a"), func(context.Context, uint64) ([]byte, error) {
		return nil, boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want the function's error", err)
	}
	started := make(chan struct{})
	finish := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := client.Idempotent(ctx, c.Client, "pay/7", []byte("a"), func(context.Context, uint64) ([]byte, error) {
			close(started)
			<-finish
			return []byte("ok"), nil
		})
		done <- err
	}()
	<-started // the abandoned key could be begun again at once
	_, err = client.Idempotent(ctx, c.Client, "pay/7", []byte("a"), func(context.Context, uint64) ([]byte, error) {
		t.Error("ran while another attempt owned the key")
		return nil, nil
	})
	if !errors.Is(err, client.ErrInProgress) {
		t.Fatalf("got %v, want ErrInProgress", err)
	}
	_, err = client.Idempotent(ctx, c.Client, "pay/7", []byte("b"), func(context.Context, uint64) ([]byte, error) {
		t.Error("ran for another payload")
		return nil, nil
	})
	if !errors.Is(err, client.ErrFingerprintMismatch) || !errors.Is(err, leasehold.ErrNotHolder) {
		t.Fatalf("got %v, want ErrFingerprintMismatch", err)
	}
	close(finish)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// The attempt is renewed while the function runs longer than its TTL, so
// nobody else takes the key over, and the result is stored.
func TestIdempotentRenewsALongAttempt(t *testing.T) {
	c := nodeClient(t, startNode(t))
	ctx := ctxFor(t, time.Minute)
	res, err := client.Idempotent(ctx, c.Client, "report/1", []byte("x"), func(ctx context.Context, _ uint64) ([]byte, error) {
		select {
		case <-time.After(3 * time.Second): // three TTLs
			return []byte("done"), nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}, client.AttemptTTL(time.Second))
	if err != nil || string(res) != "done" {
		t.Fatalf("long attempt: %q %v", res, err)
	}
	again, err := client.Idempotent(ctx, c.Client, "report/1", []byte("x"), func(context.Context, uint64) ([]byte, error) {
		t.Error("ran again after completion")
		return nil, nil
	})
	if err != nil || string(again) != "done" {
		t.Fatalf("replay: %q %v", again, err)
	}
}
