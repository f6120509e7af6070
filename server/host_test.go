package server_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/server"
)

// hostGet sends method path to node n (at its loopback address) with the
// given Host, a JSON body if body is not empty and a bearer token if
// token is not empty; it returns the status and body.
func hostGet(t *testing.T, n *testcluster.Node, method, host, path, body, token string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, n.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := httpClient(t).Do(req)
	if err != nil {
		t.Fatalf("%s %s (Host %s): %v", method, path, host, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// Without auth a node answers only Host values that name it: a page on
// another name that DNS rebinding pointed at 127.0.0.1 reads nothing from
// the API, /metrics or the dashboard, and is told (421) which flag allows
// the name. Probes (/healthz, /readyz) answer whatever the Host.
func TestHostCheckWithoutAuth(t *testing.T) {
	t.Parallel()
	n := testcluster.StartServerNode(t, func(c *server.Config) {
		c.AdvertiseURL = "http://n1.leasehold.test:7420"
		c.AllowHosts = []string{"Leasehold.Internal"}
	})
	port := n.URL[strings.LastIndex(n.URL, ":"):]
	list := `{"prefix":""}`
	allowed := []string{
		"", "localhost", "LOCALHOST" + port, "localhost.", "127.0.0.1" + port, "127.9.8.7", "[::1]" + port, "::1",
		"10.0.0.5" + port, // the node's own address, as a load balancer's probe sends it
		"n1.leasehold.test" + port, "leasehold.internal", "leasehold.internal.:80",
	}
	for _, host := range allowed {
		if status, body := hostGet(t, n, http.MethodPost, host, "/leasehold.v1.Leases/List", list, ""); status != http.StatusOK {
			t.Errorf("Host %q: the API answers %d %.200s, want 200", host, status, body)
		}
	}
	for _, host := range []string{"evil.example", "evil.example" + port, "localhost.evil.example", "n1.leasehold.test.evil.example",
		"leasehold.test", "127.0.0.1.evil.example"} {
		name := strings.TrimSuffix(host, port)
		for _, c := range []struct{ method, path, body string }{
			{http.MethodPost, "/leasehold.v1.Leases/List", list},
			{http.MethodGet, "/metrics", ""},
			{http.MethodGet, "/ui/leases", ""},
			{http.MethodGet, "/ui/force-release?resource=jobs/a", ""},
		} {
			status, body := hostGet(t, n, c.method, host, c.path, c.body, "")
			if status != http.StatusMisdirectedRequest || !strings.Contains(body, "--allow-host "+name) {
				t.Errorf("Host %q, %s: %d %.300s; want 421 naming --allow-host %s", host, c.path, status, body, name)
			}
			if strings.Contains(body, "leasehold_") || strings.Contains(body, "<html") {
				t.Errorf("Host %q, %s: the refusal shows the node's data: %.300s", host, c.path, body)
			}
		}
		// The JSON API's refusal is a Connect error, which clients decode.
		if _, body := hostGet(t, n, http.MethodPost, host, "/leasehold.v1.Leases/List", list, ""); !strings.Contains(body, `"code":"permission_denied"`) {
			t.Errorf("Host %q: the API's refusal is not a Connect error: %s", host, body)
		}
		for _, probe := range []string{"/healthz", "/readyz"} {
			if status, body := hostGet(t, n, http.MethodGet, host, probe, "", ""); status != http.StatusOK {
				t.Errorf("Host %q, %s: %d %s; probes answer whatever the Host", host, probe, status, body)
			}
		}
	}
}

// With auth, bearer tokens guard the API and /metrics (a browser sends
// none on its own), so they answer any Host; the dashboard, whose session
// is a cookie the browser does send, answers only the node's names.
func TestHostCheckWithAuth(t *testing.T) {
	t.Parallel()
	auth := testAuthenticator(t)
	n := testcluster.StartServerNode(t, func(c *server.Config) { c.Auth, c.MetricsAuth = auth, true })
	for _, c := range []struct {
		host, path, body string
		want             int
	}{
		{"evil.example", "/leasehold.v1.Leases/List", `{"prefix":""}`, http.StatusOK},
		{"evil.example", "/metrics", "", http.StatusOK},
		{"evil.example", "/ui/login", "", http.StatusMisdirectedRequest},
		{"evil.example", "/ui/leases", "", http.StatusMisdirectedRequest},
		{"localhost", "/ui/login", "", http.StatusOK},
	} {
		method := http.MethodGet
		if c.body != "" {
			method = http.MethodPost
		}
		if status, body := hostGet(t, n, method, c.host, c.path, c.body, operatorToken); status != c.want {
			t.Errorf("Host %q, %s: %d %.300s, want %d", c.host, c.path, status, body, c.want)
		}
	}
}

// namedClient is a Go client that reaches node n by the name host: its
// requests carry that Host, and its connections go to n's loopback
// address whatever the name (a DNS answer, as rebinding would give).
func namedClient(t *testing.T, n *testcluster.Node, host string, session client.SessionMode) *client.Client {
	t.Helper()
	addr := strings.TrimPrefix(n.URL, "http://")
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p, DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := client.New(client.Config{Endpoints: []string{"http://" + host + addr[strings.LastIndex(addr, ":"):]},
		HTTPClient: &http.Client{Transport: tr}, Logger: testcluster.Logger(), RequestTimeout: 2 * time.Second, Session: session})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// The Go client reaching a node by a name it does not answer to is told
// which flag allows it, on unary calls and on the session stream alike; by
// an allowed name it works.
func TestHostCheckGoClient(t *testing.T) {
	t.Parallel()
	n := testcluster.StartServerNode(t, func(c *server.Config) { c.AllowHosts = []string{"leasehold.internal"} })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, mode := range []client.SessionMode{client.SessionOn, client.SessionOff} {
		_, err := namedClient(t, n, "evil.example", mode).Acquire(ctx, "jobs/named", client.ManualRenew())
		if !errors.Is(err, leasehold.ErrPermission) || !strings.Contains(err.Error(), "--allow-host evil.example") {
			t.Errorf("session mode %d: acquire by a foreign name: %v; want permission denied naming --allow-host", mode, err)
		}
		l, err := namedClient(t, n, "leasehold.internal", mode).Acquire(ctx, "jobs/named", client.ManualRenew())
		if err != nil {
			t.Fatalf("session mode %d: acquire by an allowed name: %v", mode, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
