package main_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasehold/leasehold/server"
)

// metricsGet GETs url with an optional bearer token and returns the status.
func metricsGet(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// serve --metrics-addr moves /metrics to its own listener, and
// --metrics-auth makes it ask for an operator token; on loopback it is
// open by default.
func TestServeMetricsFlags(t *testing.T) {
	const operatorTok = "ops-5d1c9e7a3b2f8d6c4a0e9b7d5f3a1c8e"
	authFile := filepath.Join(t.TempDir(), "auth.json")
	if err := os.WriteFile(authFile, []byte(fmt.Sprintf(`{"tokens":[{"name":"olga","sha256":%q,"role":"operator"}]}`,
		server.HashToken(operatorTok))), 0o600); err != nil {
		t.Fatal(err)
	}

	n := newNode(t)
	n.args = []string{"--auth-file", authFile}
	n.start()
	if got := metricsGet(t, n.url+"/metrics", ""); got != http.StatusOK {
		t.Errorf("loopback, auth on, no --metrics-auth: /metrics without a token is %d, want 200", got)
	}

	n = newNode(t)
	metricsAddr := freeAddr(t)
	n.args = []string{"--auth-file", authFile, "--metrics-addr", metricsAddr, "--metrics-auth"}
	n.start()
	metricsURL := "http://" + metricsAddr + "/metrics"
	for _, c := range []struct {
		url, token string
		want       int
	}{
		{metricsURL, "", http.StatusUnauthorized},
		{metricsURL, operatorTok, http.StatusOK},
		{n.url + "/metrics", operatorTok, http.StatusNotFound},
		{n.url + "/healthz", "", http.StatusOK},
	} {
		if got := metricsGet(t, c.url, c.token); got != c.want {
			t.Errorf("GET %s (token %v): %d, want %d", c.url, c.token != "", got, c.want)
		}
	}
}
