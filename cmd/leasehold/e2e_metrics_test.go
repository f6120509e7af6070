package main_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/server"
)

// metricsGet GETs url with an optional bearer token and returns the status
// and the body.
func metricsGet(t *testing.T, url, token string) (int, string) {
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
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res.StatusCode, string(b)
}

// With --auth-file, /metrics asks for an operator token, on loopback too
// (its series name every tenant's queues), and says which role a worker's
// token lacks; --metrics-auth=false opens it. --metrics-addr moves it to
// its own listener.
func TestServeMetricsFlags(t *testing.T) {
	const operatorTok = "ops-5d1c9e7a3b2f8d6c4a0e9b7d5f3a1c8e"
	const workerTok = "wrk-0a2c4e6b8d1f3a5c7e9b0d2f4a6c8e1b"
	authFile := filepath.Join(t.TempDir(), "auth.json")
	if err := os.WriteFile(authFile, []byte(fmt.Sprintf(`{"tokens":[{"name":"olga","sha256":%q,"role":"operator"},`+
		`{"name":"wendy","sha256":%q,"role":"worker","prefixes":["jobs/"]}]}`,
		server.HashToken(operatorTok), server.HashToken(workerTok))), 0o600); err != nil {
		t.Fatal(err)
	}

	n := newNode(t)
	n.args = []string{"--auth-file", authFile}
	n.start()
	for _, c := range []struct {
		token string
		want  int
		says  string
	}{
		{"", http.StatusUnauthorized, "missing bearer token"},
		{workerTok, http.StatusForbidden, `token "wendy" has role worker; /metrics needs operator or admin`},
		{operatorTok, http.StatusOK, "leasehold_leases_held"},
	} {
		if got, body := metricsGet(t, n.url+"/metrics", c.token); got != c.want || !strings.Contains(body, c.says) {
			t.Errorf("loopback, auth on: /metrics (token %v) is %d %.200q, want %d saying %q", c.token != "", got, body, c.want, c.says)
		}
	}

	n = newNode(t)
	n.args = []string{"--auth-file", authFile, "--metrics-auth=false"}
	n.start()
	if got, body := metricsGet(t, n.url+"/metrics", ""); got != http.StatusOK || !strings.Contains(body, "leasehold_leases_held") {
		t.Errorf("--metrics-auth=false: /metrics without a token is %d, want 200", got)
	}

	n = newNode(t)
	metricsAddr := freeAddr(t)
	n.args = []string{"--auth-file", authFile, "--metrics-addr", metricsAddr}
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
		if got, _ := metricsGet(t, c.url, c.token); got != c.want {
			t.Errorf("GET %s (token %v): %d, want %d", c.url, c.token != "", got, c.want)
		}
	}
}
