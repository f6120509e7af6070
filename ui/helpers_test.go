package ui_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/server"
)

// Tokens of the dashboard tests' node: one per role.
const (
	adminTok    = "adm-4f1c9a7e2b6d8035c1e7a9f3b5d7e9a1"
	operatorTok = "opr-8b2d4f6a1c3e5b7d9f0a2c4e6b8d0f1a"
	workerTok   = "wrk-3e5a7c9b1d3f5e7a9c1b3d5f7e9a1c3b"
)

// startAuthNode starts a node whose API knows an admin (alice), an
// operator (olga) and a worker (wendy, every resource).
func startAuthNode(t *testing.T) *testcluster.Node {
	t.Helper()
	auth, err := server.NewAuthenticator(server.AuthFile{Tokens: []server.TokenEntry{
		{Name: "alice", SHA256: server.HashToken(adminTok), Role: "admin"},
		{Name: "olga", SHA256: server.HashToken(operatorTok), Role: "operator"},
		{Name: "wendy", SHA256: server.HashToken(workerTok), Role: "worker", Prefixes: []string{""}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return testcluster.StartServerNode(t, func(c *server.Config) { c.Auth = auth })
}

var hc = &http.Client{Timeout: 10 * time.Second}

// call makes a JSON API call with token and decodes the answer into out
// (if not nil); it returns the HTTP status and the body.
func call(t *testing.T, n *testcluster.Node, token, proc, body string, out any) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", n.URL+proc, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %v: %s", proc, err, b)
		}
	}
	return resp.StatusCode, string(b)
}

// acquired is the part of an Acquire answer the tests use.
type acquired struct {
	Lease struct {
		ID    uint64 `json:"id,string"`
		Token uint64 `json:"token,string"`
	} `json:"lease"`
	Secret string `json:"secret"`
}

// acquire takes resource for the worker, with a known secret.
func acquire(t *testing.T, n *testcluster.Node, resource, owner, secret string) acquired {
	t.Helper()
	var a acquired
	status, body := call(t, n, workerTok, "/leasehold.v1.Leases/Acquire",
		fmt.Sprintf(`{"resources":[%q],"ttl":"60s","owner":%q,"operation":"nightly-report","secret":%q}`, resource, owner, secret), &a)
	if status != http.StatusOK {
		t.Fatalf("acquire %s: HTTP %d %s", resource, status, body)
	}
	return a
}

// get fetches a dashboard path with an optional bearer token.
func get(t *testing.T, n *testcluster.Node, token, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", n.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// dataPaths are every dashboard page and fragment that shows data.
var dataPaths = []string{
	"/ui/leases", "/ui/leases/rows", "/ui/lease?resource=jobs/report", "/ui/force-release?resource=jobs/report",
	"/ui/elections", "/ui/elections/rows", "/ui/idempotency", "/ui/queues", "/ui/groups", "/ui/barriers", "/ui/cluster", "/ui/cluster/rows", "/ui/audit",
	"/ui/charts", "/ui/charts/data", "/ui/lease/timeline?resource=jobs/report", "/ui/runbook",
}
