package ui_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/server"
)

// Tokens limited to the prefix a/.
const (
	limitedOperatorTok = "opr-a-0b2d4f6a1c3e5b7d9f0a2c4e6b8d0f1a"
	limitedAdminTok    = "adm-a-0f1c9a7e2b6d8035c1e7a9f3b5d7e9a1"
)

// startLimitedNode is startAuthNode's node with an operator (olga-a) and
// an admin (ada) limited to a/ besides.
func startLimitedNode(t *testing.T) *testcluster.Node {
	t.Helper()
	auth, err := server.NewAuthenticator(server.AuthFile{Tokens: []server.TokenEntry{
		{Name: "alice", SHA256: server.HashToken(adminTok), Role: "admin"},
		{Name: "wendy", SHA256: server.HashToken(workerTok), Role: "worker", Prefixes: []string{""}},
		{Name: "olga-a", SHA256: server.HashToken(limitedOperatorTok), Role: "operator", Prefixes: []string{"a/"}},
		{Name: "ada", SHA256: server.HashToken(limitedAdminTok), Role: "admin", Prefixes: []string{"a/"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return testcluster.StartServerNode(t, func(c *server.Config) { c.Auth = auth })
}

// A viewer limited to a/ sees the leases, lists and lease pages of a/
// only (the lists open on its prefix instead of failing), no charts (they
// count every tenant's calls), and may force-release only under a/.
func TestDashboardOfALimitedTokenShowsOnlyItsPrefixes(t *testing.T) {
	n := startLimitedNode(t)
	acquire(t, n, "a/report", "owner-of-a", "5ec4e75ec4e75ec4e75ec4e75ec4e75e")
	theirs := acquire(t, n, "b/secret", "owner-of-b", "6ec4e75ec4e75ec4e75ec4e75ec4e75e")

	status, body := get(t, n, limitedOperatorTok, "/ui/leases")
	if status != http.StatusOK || !strings.Contains(body, "a/report") || !strings.Contains(body, "owner-of-a") ||
		!strings.Contains(body, "limited to a/") {
		t.Fatalf("a/'s operator on /ui/leases: HTTP %d, want 200 with a/report and its limit:\n%.2000s", status, body)
	}
	if strings.Contains(body, `href="/ui/charts"`) {
		t.Errorf("a/'s operator is offered the node-wide charts")
	}
	for _, path := range []string{"/ui/leases", "/ui/leases/rows", "/ui/leases?prefix=b/", "/ui/lease?resource=b/secret",
		"/ui/force-release?resource=b/secret", "/ui/elections", "/ui/idempotency", "/ui/queues", "/ui/groups",
		"/ui/queues?prefix=b/", "/ui/audit", "/ui/charts", "/ui/charts/data", "/ui/lease/timeline?resource=b/secret",
		"/ui/elections/rows?prefix=b/", "/ui/events?view=charts", "/ui/events?view=queue", "/ui/events?view=leases&prefix=b/",
		"/ui/events?view=lease&resource=b/secret"} {
		for _, tok := range []string{limitedOperatorTok, limitedAdminTok} {
			status, body := get(t, n, tok, path)
			if strings.Contains(body, "b/secret") && !strings.Contains(path, "b/secret") || strings.Contains(body, "owner-of-b") {
				t.Errorf("GET %s by a viewer limited to a/ shows b/secret:\n%.2000s", path, body)
			}
			refused := strings.Contains(path, "b/") || strings.HasPrefix(path, "/ui/charts") || strings.Contains(path, "view=charts") ||
				strings.Contains(path, "view=queue")
			if refused != (status == http.StatusForbidden) || status != http.StatusOK && status != http.StatusForbidden {
				t.Errorf("GET %s by a viewer limited to a/: HTTP %d, want refused: %v\n%.600s", path, status, refused, body)
			}
		}
	}

	force := func(resource string, lease uint64) (int, string) {
		form := url.Values{"resource": {resource}, "lease_id": {strconv.FormatUint(lease, 10)}, "confirm": {resource}, "reason": {"test"}}
		req, _ := http.NewRequest("POST", n.URL+"/ui/force-release", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+limitedAdminTok)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Location")
	}
	if status, _ := force("b/secret", theirs.Lease.ID); status != http.StatusForbidden {
		t.Fatalf("a/'s admin force-releasing b/secret: HTTP %d, want 403", status)
	}
	var held struct {
		Holder *struct{} `json:"holder"`
	}
	if status, body := call(t, n, adminTok, "/leasehold.v1.Leases/Get", `{"resource":"b/secret"}`, &held); status != http.StatusOK || held.Holder == nil {
		t.Fatalf("b/secret after a/'s admin tried to force it: HTTP %d %s, want still held", status, body)
	}
	ours := acquire(t, n, "a/forced", "owner-of-a", "7ec4e75ec4e75ec4e75ec4e75ec4e75e")
	if status, where := force("a/forced", ours.Lease.ID); status != http.StatusSeeOther || !strings.Contains(where, "forced=1") {
		t.Fatalf("a/'s admin force-releasing a/forced: HTTP %d to %q, want the lease page after the release", status, where)
	}
}

var noRedirect = &http.Client{Timeout: hc.Timeout, CheckRedirect: func(*http.Request, []*http.Request) error {
	return http.ErrUseLastResponse
}}
