package faults

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	hist "github.com/leasehold/leasehold/internal/history"
)

// newClient makes a Go client for urls (token: bearer token, or "") with
// its own transport, closed when the test ends.
func newClient(t testing.TB, token string, urls ...string) *client.Client {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := client.New(client.Config{Endpoints: urls, HTTPClient: &http.Client{Transport: tr},
		Logger: slog.New(slog.DiscardHandler), RequestTimeout: 3 * time.Second, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// workload is load that keeps going through a fault: workers that each
// acquire their own resource, write fenced values to keys of their own and
// release, recording every acknowledgement in h. Errors (a node down, a
// leader change) are expected and not recorded.
type workload struct {
	acks   atomic.Int64 // acknowledged writes
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// workloadTTL is roomy: a worker whose answer was lost in a fault leaves a
// lease that must expire before it can acquire again.
const workloadTTL = 8 * time.Second

func startWorkload(c *client.Client, h *history, prefix string, workers int) *workload {
	ctx, cancel := context.WithCancel(context.Background())
	w := &workload{cancel: cancel}
	for i := range workers {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.run(ctx, c, h, fmt.Sprintf("%s/w%d", prefix, i))
		}()
	}
	return w
}

// stop ends the load and waits for in-flight calls.
func (w *workload) stop() {
	w.cancel()
	w.wg.Wait()
}

// waitAcks waits until n more writes are acknowledged than now.
func (w *workload) waitAcks(n int64, timeout time.Duration) error {
	want := w.acks.Load() + n
	return checkFor(timeout, func() error {
		if got := w.acks.Load(); got < want {
			return fmt.Errorf("%d of %d acknowledged writes", got, want)
		}
		return nil
	})
}

func (w *workload) run(ctx context.Context, c *client.Client, h *history, resource string) {
	for n := 0; ctx.Err() == nil; n++ {
		l, err := c.Acquire(ctx, resource, client.TTL(workloadTTL), client.Wait(workloadTTL+2*time.Second))
		if err != nil {
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		h.granted(resource, l.ID(), l.Token())
		for k := range 3 {
			key := fmt.Sprintf("%s/%d-%d", resource, n, k)
			value := []byte(fmt.Sprintf("value %d-%d of %s", n, k, resource))
			if putFenced(ctx, c, h, key, value, resource, l.Token()) == nil {
				w.acks.Add(1)
			}
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		l.Release(rctx)
		cancel()
	}
}

// putFenced writes value at key fenced by (resource, token) and records
// the write if it is acknowledged.
func putFenced(ctx context.Context, c *client.Client, h *history, key string, value []byte, resource string, token uint64) error {
	v, err := c.Put(ctx, key, value, client.Fence(resource, token))
	if err == nil {
		h.wrote(hist.Write{Key: key, Value: value, Version: v, Resource: resource, Token: token})
	}
	return err
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// regrant acquires every resource h has seen once more and writes one
// fenced value under it: after a fault, the next tokens must be above every
// token answered before, and the new holders' writes must land.
func regrant(ctx context.Context, c *client.Client, h *history, prefix string) error {
	for _, r := range h.resources() {
		old := h.maxToken(r)
		var l *client.Lease
		err := retryUnavailable(ctx, func(ctx context.Context) (err error) {
			l, err = c.Acquire(ctx, r, client.TTL(workloadTTL), client.Wait(2*workloadTTL))
			return err
		})
		if err != nil {
			return fmt.Errorf("acquire %s after the fault: %w", r, err)
		}
		h.granted(r, l.ID(), l.Token())
		key := fmt.Sprintf("%s/after/%s", prefix, r)
		err = retryUnavailable(ctx, func(ctx context.Context) error {
			return putFenced(ctx, c, h, key, []byte("after "+r), r, l.Token())
		})
		if err != nil {
			l.Release(ctx)
			return fmt.Errorf("fenced write to %s after the fault: %w", key, err)
		}
		// The previous holder, back from the fault, writes with its token:
		// it must be refused (if it is not, the history counts it stale).
		putFenced(ctx, c, h, key+"/stale", []byte("stale "+r), r, old)
		l.Release(ctx)
	}
	return nil
}
