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

func metricsAuthNode(t *testing.T, apart bool) *testcluster.Node {
	t.Helper()
	auth := testAuthenticator(t)
	return testcluster.StartServerNode(t, func(c *server.Config) {
		c.Auth, c.MetricsAuth, c.MetricsApart = auth, true, apart
	})
}

// With metrics auth, /metrics needs an operator or admin token.
func TestMetricsAuth(t *testing.T) {
	t.Parallel()
	n := metricsAuthNode(t, false)
	for _, tc := range []struct {
		name, header string
		want         int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"unknown token", "Bearer not-a-token", http.StatusUnauthorized},
		{"worker", "Bearer " + workerToken, http.StatusForbidden},
		{"operator", "Bearer " + operatorToken, http.StatusOK},
		{"admin, lower-case scheme", "bearer " + adminToken, http.StatusOK},
	} {
		status, body := getWithToken(t, n.URL+"/metrics", tc.header)
		if status != tc.want {
			t.Errorf("%s: status %d %.200q, want %d", tc.name, status, body, tc.want)
		}
		if status == http.StatusOK && !strings.Contains(body, "leasehold_leases_held") {
			t.Errorf("%s: 200 without the leasehold series", tc.name)
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
