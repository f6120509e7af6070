package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/server"
)

// getWithToken GETs url with a bearer token (none if empty) and returns the
// status and body.
func getWithToken(t *testing.T, url, token string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	res, err := httpClient(t).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// Tokens limited to prefixes, of roles that may otherwise scrape.
const (
	tenantOperatorToken = "tenant-operator-token-0123456789"
	tenantAdminToken    = "tenant-admin-token-0123456789"
	everyPrefixToken    = "every-prefix-operator-token-0123456789"
)

func metricsAuthNode(t *testing.T, apart bool) *testcluster.Node {
	t.Helper()
	auth, err := server.NewAuthenticator(server.AuthFile{Tokens: []server.TokenEntry{
		{Name: "ci-worker", SHA256: server.HashToken(workerToken), Role: "worker", Prefixes: []string{"jobs/"}},
		{Name: "olga", SHA256: server.HashToken(operatorToken), Role: "operator"},
		{Name: "alice", SHA256: server.HashToken(adminToken), Role: "admin"},
		{Name: "tenant-a-ops", SHA256: server.HashToken(tenantOperatorToken), Role: "operator", Prefixes: []string{"a/"}},
		{Name: "tenant-a-admin", SHA256: server.HashToken(tenantAdminToken), Role: "admin", Prefixes: []string{"a/", "b/"}},
		{Name: "all-ops", SHA256: server.HashToken(everyPrefixToken), Role: "operator", Prefixes: []string{""}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return testcluster.StartServerNode(t, func(c *server.Config) {
		c.Auth, c.MetricsAuth, c.MetricsApart = auth, true, apart
	})
}

// With metrics auth, /metrics needs an operator or admin token without
// prefixes: its series name every tenant's queues. A refusal says what
// would be accepted.
func TestMetricsAuth(t *testing.T) {
	t.Parallel()
	n := metricsAuthNode(t, false)
	for _, tc := range []struct {
		name, header string
		want         int
		says         string
	}{
		{"no token", "", http.StatusUnauthorized, "missing bearer token"},
		{"unknown token", "Bearer not-a-token", http.StatusUnauthorized, "unknown bearer token"},
		{"worker", "Bearer " + workerToken, http.StatusForbidden, `token "ci-worker" has role worker; /metrics needs operator or admin`},
		{"operator limited to a prefix", "Bearer " + tenantOperatorToken, http.StatusForbidden,
			`token "tenant-a-ops" is limited to the prefixes ["a/"], and /metrics names every tenant's queues`},
		{"admin limited to prefixes", "Bearer " + tenantAdminToken, http.StatusForbidden, `token "tenant-a-admin" is limited`},
		{"operator of every prefix", "Bearer " + everyPrefixToken, http.StatusOK, "leasehold_leases_held"},
		{"operator", "Bearer " + operatorToken, http.StatusOK, "leasehold_leases_held"},
		{"admin, lower-case scheme", "bearer " + adminToken, http.StatusOK, "leasehold_leases_held"},
	} {
		status, body := getWithToken(t, n.URL+"/metrics", tc.header)
		if status != tc.want || !strings.Contains(body, tc.says) {
			t.Errorf("%s: status %d %.200q, want %d saying %q", tc.name, status, body, tc.want, tc.says)
		}
		if strings.Contains(body, operatorToken) || strings.Contains(body, adminToken) {
			t.Errorf("%s: the reply shows a token", tc.name)
		}
	}
	// Health checks stay open.
	if status, _ := getWithToken(t, n.URL+"/healthz", ""); status != http.StatusOK {
		t.Errorf("/healthz without a token: %d", status)
	}
}

// With MetricsApart, /metrics is served on its own listener and not on
// the API's.
func TestMetricsApart(t *testing.T) {
	t.Parallel()
	n := metricsAuthNode(t, true)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- n.Server.ServeMetrics(l) }()
	if status, _ := getWithToken(t, n.URL+"/metrics", "Bearer "+operatorToken); status != http.StatusNotFound {
		t.Fatalf("/metrics on the API listener: status %d, want 404", status)
	}
	url := "http://" + l.Addr().String() + "/metrics"
	if status, _ := getWithToken(t, url, ""); status != http.StatusUnauthorized {
		t.Fatalf("/metrics apart without a token: status %d, want 401", status)
	}
	if status, body := getWithToken(t, url, "Bearer "+operatorToken); status != http.StatusOK || !strings.Contains(body, "leasehold_leases_held") {
		t.Fatalf("/metrics apart with a token: status %d", status)
	}
	n.Stop()
	if err := <-done; err != nil {
		t.Fatalf("ServeMetrics after Stop: %v", err)
	}
}
