package ui_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/testcluster"
)

// Without a token every page and fragment answers 401 with the login
// form; a worker's token gets 403; neither sees a byte of the data an
// operator sees.
func TestDashboardShowsNoDataWithoutAnOperatorToken(t *testing.T) {
	n := startAuthNode(t)
	acquire(t, n, "jobs/report", "owner-only-operators-see", "5ec4e75ec4e75ec4e75ec4e75ec4e75e")
	for _, path := range dataPaths {
		status, body := get(t, n, "", path)
		if status != http.StatusUnauthorized || !strings.Contains(body, `id="login"`) {
			t.Errorf("GET %s without a token: HTTP %d, want 401 and the login form:\n%.400s", path, status, body)
		}
		if strings.Contains(body, "owner-only-operators-see") || strings.Contains(body, "jobs/report") && !strings.Contains(path, "jobs/report") {
			t.Errorf("GET %s without a token shows the lease:\n%s", path, body)
		}
		status, body = get(t, n, workerTok, path)
		if status != http.StatusForbidden || !strings.Contains(body, "needs an operator or admin token") {
			t.Errorf("GET %s with a worker's token: HTTP %d, want 403:\n%.400s", path, status, body)
		}
		if strings.Contains(body, "owner-only-operators-see") {
			t.Errorf("GET %s with a worker's token shows the lease", path)
		}
		if status, _ := get(t, n, operatorTok, path); status != http.StatusOK {
			t.Errorf("GET %s with an operator's token: HTTP %d, want 200", path, status)
		}
	}
	// A live fragment polled after the session ended says so in place
	// (static/dash.js puts it in place), still without data.
	req, _ := http.NewRequest("GET", n.URL+"/ui/leases/rows", nil)
	req.Header.Set("Leasehold-Fragment", "true")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "session has ended") || strings.Contains(string(b), "owner-only-operators-see") {
		t.Fatalf("a polled fragment without a session: HTTP %d:\n%s", resp.StatusCode, b)
	}
	if _, body := get(t, n, operatorTok, "/ui/leases/rows"); !strings.Contains(body, "owner-only-operators-see") {
		t.Fatalf("the operator's leases rows lack the holder:\n%s", body)
	}
	req, _ = http.NewRequest("POST", n.URL+"/ui/force-release", strings.NewReader("resource=jobs/report&lease_id=4&confirm=jobs/report&reason=x"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a forced release without a token: HTTP %d, want 401", resp.StatusCode)
	}
	if _, body := call(t, n, operatorTok, "/leasehold.v1.Leases/Get", `{"resource":"jobs/report"}`, nil); !strings.Contains(body, "owner-only-operators-see") {
		t.Fatalf("the lease is gone after a refused forced release: %s", body)
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]{32})"`)

// A browser's session: the login keeps the token in an HttpOnly,
// SameSite=Strict cookie; a POST without the session's form token is
// refused and changes nothing.
func TestDashboardLoginCookieAndFormToken(t *testing.T) {
	n := startAuthNode(t)
	a := acquire(t, n, "jobs/report", "worker-1", "5ec4e75ec4e75ec4e75ec4e75ec4e75e")
	jar, _ := cookiejar.New(nil)
	br := &http.Client{Jar: jar, Timeout: hc.Timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form := func(path string, v url.Values) (*http.Response, string) {
		t.Helper()
		resp, err := br.PostForm(n.URL+path, v)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, err := br.Get(n.URL + "/ui/login")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindStringSubmatch(string(b))
	if m == nil {
		t.Fatalf("the login form has no form token:\n%s", b)
	}
	csrf := m[1]

	if resp, body := form("/ui/login", url.Values{"csrf": {csrf}, "token": {"not-a-token"}}); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "unknown bearer token") {
		t.Fatalf("login with an unknown token: HTTP %d:\n%.400s", resp.StatusCode, body)
	}
	if resp, _ := form("/ui/login", url.Values{"token": {adminTok}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("login without the form token: HTTP %d, want 403", resp.StatusCode)
	}
	resp, _ = form("/ui/login", url.Values{"csrf": {csrf}, "token": {adminTok}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: HTTP %d, want 303", resp.StatusCode)
	}
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "leasehold_token" {
			session = c
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Secure || session.Path != "/ui/" {
		t.Fatalf("the session cookie is %+v; want HttpOnly, SameSite=Strict, Path=/ui/, not Secure over plain HTTP", session)
	}

	forced := url.Values{"resource": {"jobs/report"}, "lease_id": {fmt.Sprint(a.Lease.ID)}, "confirm": {"jobs/report"}, "reason": {"csrf test"}}
	resp, body := form("/ui/force-release", forced)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "came from another site") {
		t.Fatalf("a forced release without the form token: HTTP %d:\n%.400s", resp.StatusCode, body)
	}
	forced.Set("csrf", strings.Repeat("0", 32))
	if resp, _ := form("/ui/force-release", forced); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a forced release with a wrong form token: HTTP %d, want 403", resp.StatusCode)
	}
	if _, body := call(t, n, operatorTok, "/leasehold.v1.Leases/Get", `{"resource":"jobs/report"}`, nil); !strings.Contains(body, "worker-1") {
		t.Fatalf("the lease is gone after refused forms: %s", body)
	}
	forced.Set("csrf", csrf)
	if resp, _ := form("/ui/force-release", forced); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a forced release with the form token: HTTP %d, want 303", resp.StatusCode)
	}
	if _, body := call(t, n, operatorTok, "/leasehold.v1.Leases/Get", `{"resource":"jobs/report"}`, nil); strings.Contains(body, "worker-1") {
		t.Fatalf("after the forced release jobs/report is still held: %s", body)
	}
	// The audit view filters by actor, action and resource.
	for query, want := range map[string]bool{
		"": true, "?actor=alice": true, "?actor=olga": false, "?action=force-release&resource=jobs/report": true,
		"?resource=jobs/other": false, "?since=1ms": false,
	} {
		_, body := get(t, n, operatorTok, "/ui/audit"+query)
		if strings.Contains(body, "csrf test") != want {
			t.Errorf("/ui/audit%s shows the forced release: %v, want %v", query, !want, want)
		}
	}
	if status, body := get(t, n, operatorTok, "/ui/audit?since=yesterday"); status != http.StatusBadRequest || !strings.Contains(body, "give a duration") {
		t.Errorf("/ui/audit?since=yesterday: HTTP %d:\n%.300s", status, body)
	}

	// Logged out, the browser sees the login form again.
	if resp, _ := form("/ui/logout", url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: HTTP %d", resp.StatusCode)
	}
	resp, err = br.Get(n.URL + "/ui/leases")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), `id="login"`) {
		t.Fatalf("after logging out: HTTP %d:\n%.300s", resp.StatusCode, b)
	}
}

// Without auth the node serves everyone as an admin, API and dashboard
// alike: no login, and the forced release is offered.
func TestDashboardWithoutAuthIsTheAPIsAnonymousAdmin(t *testing.T) {
	n := testcluster.StartNode(t, "")
	req := `{"resources":["jobs/open"],"ttl":"60s","owner":"w-open"}`
	if status, body := call(t, n, "", "/leasehold.v1.Leases/Acquire", req, nil); status != http.StatusOK {
		t.Fatalf("acquire: HTTP %d %s", status, body)
	}
	status, body := get(t, n, "", "/ui/lease?resource=jobs/open")
	if status != http.StatusOK || !strings.Contains(body, "w-open") || !strings.Contains(body, `id="force-link"`) {
		t.Fatalf("the lease page without auth: HTTP %d:\n%.600s", status, body)
	}
}
