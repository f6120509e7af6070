package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"

	"github.com/leasehold/leasehold/internal/testcluster"
)

// The harness itself: a follower forwards, a killed leader is replaced, and
// a cut link isolates a node.
func TestClusterHarness(t *testing.T) {
	c := testcluster.Start(t, 3)
	leader := c.WaitLeader(10 * time.Second)
	follower := (leader + 1) % 3
	cl, err := client.New(client.Config{Endpoints: []string{c.URL(follower)}, Logger: testcluster.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := cl.Acquire(ctx, "x", client.TTL(10*time.Second), client.ManualRenew())
	if err != nil {
		t.Fatalf("acquire through a follower: %v", err)
	}
	c.Kill(leader)
	next := c.WaitNewLeader(leader, 10*time.Second)
	cl2, _ := client.New(client.Config{Endpoints: []string{c.URL(next)}, Logger: testcluster.Logger()})
	l2, err := cl2.Acquire(ctx, "y", client.TTL(10*time.Second), client.ManualRenew())
	if err != nil {
		t.Fatalf("acquire after failover: %v", err)
	}
	if l2.Token() <= l.Token() {
		t.Fatalf("token after failover %d is not above %d", l2.Token(), l.Token())
	}
	if err := l.Renew(ctx); err != nil {
		t.Fatalf("the lease did not survive the failover: %v", err)
	}
	c.Restart(leader)
	idx, _ := c.Node(next).Cluster.EncodedState()
	if err := c.WaitApplied(idx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

// hostRecorder records the host of every request it carries.
type hostRecorder struct {
	mu    sync.Mutex
	hosts []string
}

func (h *hostRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	h.hosts = append(h.hosts, r.URL.Host)
	h.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

// A client that lists every node follows the leader's mark on answers, so
// after its first request through a follower it talks to the leader
// directly.
func TestClientFollowsTheLeader(t *testing.T) {
	c := testcluster.Start(t, 3)
	leader := c.WaitLeader(10 * time.Second)
	follower := (leader + 1) % 3
	rec := &hostRecorder{}
	cl, err := client.New(client.Config{Endpoints: []string{c.URL(follower), c.URL(leader)},
		HTTPClient: &http.Client{Transport: rec}, Logger: testcluster.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 3 {
		if _, err := cl.Acquire(ctx, fmt.Sprint("follow/", i), client.ManualRenew()); err != nil {
			t.Fatal(err)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	want := strings.TrimPrefix(c.URL(leader), "http://")
	if len(rec.hosts) < 3 || rec.hosts[0] != strings.TrimPrefix(c.URL(follower), "http://") || rec.hosts[len(rec.hosts)-1] != want {
		t.Fatalf("requests went to %v; want the first to the follower and the rest to the leader %s", rec.hosts, want)
	}
}
