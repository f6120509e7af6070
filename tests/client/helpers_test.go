package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/client/clientprom"
	"github.com/leasehold/leasehold/internal/testcluster"

	"github.com/leasehold/leasehold/internal/testutil"
)

// callTimeout bounds every call a test makes that is not meant to block.
const callTimeout = 10 * time.Second

// startNode starts a real single-voter node (raft, fsync'd log in a temp
// dir, API on loopback) that stops when the test ends.
func startNode(t testing.TB) *testcluster.Node {
	t.Helper()
	return testcluster.StartNode(t, "")
}

// testClient is a client.Client plus what a test needs to inspect it.
type testClient struct {
	*client.Client
	Reg *prometheus.Registry
}

// newClient makes a client for endpoints with its own HTTP transport, whose
// idle connections are closed when the test ends, its own metrics registry,
// and a logger that is silent unless LEASEHOLD_TEST_LOG is set. cfg may
// preset any field; Endpoints is overwritten when endpoints are given.
func newClient(t testing.TB, cfg client.Config, endpoints ...string) *testClient {
	t.Helper()
	if len(endpoints) > 0 {
		cfg.Endpoints = endpoints
	}
	if cfg.HTTPClient == nil {
		tr := &http.Transport{}
		if testcluster.SessionsOn() && cfg.Session == client.SessionDefault {
			// Every lease call on a session stream, over h2c.
			var p http.Protocols
			p.SetUnencryptedHTTP2(true)
			tr.Protocols, cfg.Session = &p, client.SessionOn
		}
		t.Cleanup(tr.CloseIdleConnections)
		cfg.HTTPClient = &http.Client{Transport: tr}
	}
	if cfg.Logger == nil {
		cfg.Logger = testcluster.Logger()
	}
	reg := prometheus.NewRegistry()
	if cfg.Metrics == nil {
		cfg.Metrics = clientprom.New(reg)
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	return &testClient{Client: c, Reg: reg}
}

// onStream is cfg for a client whose lease calls ride a session stream,
// over h2c on a transport of its own (closed when the test ends).
func onStream(t testing.TB, cfg client.Config) client.Config {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr.Protocols = &p
	cfg.HTTPClient, cfg.Session = &http.Client{Transport: tr}, client.SessionOn
	return cfg
}

// nodeClient is newClient for one node.
func nodeClient(t testing.TB, n *testcluster.Node) *testClient {
	t.Helper()
	return newClient(t, client.Config{}, n.URL)
}

// ctxFor and eventually keep their old names for this package's tests.
var (
	ctxFor     = testutil.Context
	eventually = testutil.Eventually[func() bool]
)

// hold registers a Release of l for the end of the test (before the node
// stops), so no renewal loop outlives the test. A lease that already ended
// needs none.
func hold(t testing.TB, l *client.Lease) *client.Lease {
	t.Helper()
	t.Cleanup(func() {
		if l.Err() != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		l.Release(ctx)
	})
	return l
}

// mustAcquire acquires resources (one or many) and registers their release.
func mustAcquire(t testing.TB, c *testClient, resources []string, opts ...client.Option) *client.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	l, err := c.AcquireMany(ctx, resources, opts...)
	if err != nil {
		t.Fatalf("acquire %q: %v", resources, err)
	}
	if l.Token() == 0 || l.ID() == 0 {
		t.Fatalf("acquire %q: lease without id or token (id %d, token %d)", resources, l.ID(), l.Token())
	}
	return hold(t, l)
}

// get asks the server about resource.
func get(t testing.TB, c *testClient, resource string) *client.ResourceInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := c.Get(ctx, resource)
	if err != nil {
		t.Fatalf("get %q: %v", resource, err)
	}
	return res
}

// holderOf is the lease holding resource, or a zero LeaseInfo if it is free.
func holderOf(t testing.TB, c *testClient, resource string) client.LeaseInfo {
	t.Helper()
	if h := get(t, c, resource).Holder; h != nil {
		return *h
	}
	return client.LeaseInfo{}
}

// waitDone waits up to d for the lease to end and returns when it noticed.
func waitDone(t testing.TB, l *client.Lease, d time.Duration) time.Time {
	t.Helper()
	select {
	case <-l.Done():
		return time.Now()
	case <-time.After(d):
		t.Fatalf("lease %d did not end within %v (deadline in %v)", l.ID(), d, time.Until(l.Deadline()))
		return time.Time{}
	}
}

// isDone reports whether the lease's Done channel is closed.
func isDone(l *client.Lease) bool {
	select {
	case <-l.Done():
		return true
	default:
		return false
	}
}

// counter reads a client counter from reg (0 if never incremented).
func counter(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// closedAddr is a loopback address on which nothing listens.
func closedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// countingTransport counts requests per host and passes them on.
type countingTransport struct {
	next http.RoundTripper
	mu   sync.Mutex
	hits map[string]int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.hits[r.URL.Host]++
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

func (c *countingTransport) count(host string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits[host]
}

// switchDialer sends every connection to whatever address is current, so a
// client keeps one endpoint URL while the node behind it is restarted on a
// new API port.
type switchDialer struct {
	mu   sync.Mutex
	addr string
	d    net.Dialer
}

func (s *switchDialer) set(url string) {
	s.mu.Lock()
	s.addr = strings.TrimPrefix(url, "http://")
	s.mu.Unlock()
}

func (s *switchDialer) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	s.mu.Lock()
	addr := s.addr
	s.mu.Unlock()
	return s.d.DialContext(ctx, network, addr)
}

// missing reports which of targets err fails to match.
func missing(err error, targets ...error) []error {
	var out []error
	for _, target := range targets {
		if !errors.Is(err, target) {
			out = append(out, target)
		}
	}
	return out
}
