package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/server"
)

// watchErr runs a watch of prefixes with c until it fails or 5s pass.
func watchErr(t *testing.T, c *client.Client, prefixes ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	w := c.Watch(ctx, prefixes)
	for range w.Events() {
	}
	return w.Err()
}

// TestWatchAuthKeepsWorkersInTheirPrefixes: a worker watches only within
// its prefixes (and not everything); without a token nobody watches.
func TestWatchAuthKeepsWorkersInTheirPrefixes(t *testing.T) {
	n := authNode(t)
	worker := tokenClient(t, n.URL, workerToken)
	for _, prefixes := range [][]string{{"other/"}, {"jobs/", "other/"}, {""}, nil} {
		err := watchErr(t, worker, prefixes...)
		if !errors.Is(err, leasehold.ErrPermission) || !strings.Contains(err.Error(), "ci-worker") {
			t.Errorf("worker (jobs/) watching %q: %v, want permission denied naming the token", prefixes, err)
		}
	}
	if err := watchErr(t, tokenClient(t, n.URL, ""), "jobs/"); !errors.Is(err, leasehold.ErrUnauthenticated) {
		t.Errorf("watch without a token: %v, want unauthenticated", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w := worker.Watch(ctx, []string{"jobs/nightly"}, client.FromIndex(0))
	l, err := worker.Acquire(ctx, "jobs/nightly", client.TTL(time.Minute), client.ManualRenew())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.WithoutCancel(ctx))
	select {
	case e := <-w.Events():
		if e.Kind != "granted" || e.LeaseID != l.ID() || e.Token != l.Token() {
			t.Fatalf("worker's watch of its own prefix: %+v, want lease %d granted", e, l.ID())
		}
	case <-ctx.Done():
		t.Fatalf("worker's watch of its own prefix saw nothing: %v", w.Err())
	}
}

// TestWatchRefusesBadPrefixes: too many prefixes, or one that is not
// printable text, are refused with InvalidArgument naming the rule.
func TestWatchRefusesBadPrefixes(t *testing.T) {
	n := startNode(t)
	c := tokenClient(t, n.URL, "")
	many := make([]string, 65)
	for i := range many {
		many[i] = fmt.Sprintf("p%d/", i)
	}
	if err := watchErr(t, c, many...); !errors.Is(err, leasehold.ErrInvalid) || !strings.Contains(err.Error(), "the limit is 64") {
		t.Errorf("65 prefixes: %v, want invalid argument naming the limit", err)
	}
	if err := watchErr(t, c, "ok/", "bad\x01"); !errors.Is(err, leasehold.ErrInvalid) || !strings.Contains(err.Error(), "prefixes[1]") {
		t.Errorf("a control character: %v, want invalid argument naming prefixes[1]", err)
	}
}

// TestWatchOutlivesTheBodyTimeout: the body timeout bounds the arrival of
// the request, not the stream: one stream (HTTP/1.1 and HTTP/2, as gRPC
// clients speak it) still delivers well after it.
func TestWatchOutlivesTheBodyTimeout(t *testing.T) {
	n := testcluster.StartServerNode(t, func(c *server.Config) { c.BodyTimeout = 200 * time.Millisecond })
	c := tokenClient(t, n.URL, "")
	for name, hc := range map[string]*http.Client{"http/1.1": httpClient(t), "h2c": h2cClient(t)} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := leaseholdv1connect.NewWatchClient(hc, n.URL).Watch(ctx, connect.NewRequest(&pb.WatchRequest{Prefixes: []string{"late/"}}))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if !s.Receive() {
				t.Fatalf("no opening mark: %v", s.Err())
			}
			time.Sleep(time.Second) // five body timeouts: the stream must outlive them
			v, err := c.Put(ctx, "late/key", []byte("v"))
			if err != nil {
				t.Fatal(err)
			}
			if !s.Receive() {
				t.Fatalf("the stream ended: %v", s.Err())
			}
			if es := s.Msg().Events; len(es) != 1 || es[0].Key != "late/key" || es[0].Version != v {
				t.Fatalf("got %v, want the put of late/key at %d", es, v)
			}
		})
	}
}
