package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
)

// TestWatchEndsWithClose: a client's Close ends its watches, with
// ErrClosed, and leaves no goroutine behind (goleak in TestMain).
func TestWatchEndsWithClose(t *testing.T) {
	n := startNode(t)
	c := nodeClient(t, n)
	w := c.Watch(context.Background(), []string{"x/"}, client.FromIndex(0))
	// The watch is running once it delivers the put.
	ctx := ctxFor(t, 10*time.Second)
	if _, err := c.Put(ctx, "x/1", []byte("v")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Events():
	case <-ctx.Done():
		t.Fatalf("no event: %v", w.Err())
	}
	c.Close()
	done := make(chan error, 1)
	go func() { done <- w.Err() }()
	select {
	case err := <-done:
		if !errors.Is(err, client.ErrClosed) {
			t.Fatalf("watch after Close: %v, want ErrClosed", err)
		}
	case <-ctx.Done():
		t.Fatal("the watch did not end when the client closed")
	}
}
