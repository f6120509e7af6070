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

var leaseIDField = regexp.MustCompile(`name="lease_id" value="([0-9]+)"`)

// visitor is a browser as the node sees it: its requests reach the
// node's loopback address with the Host of the page's name (for a page on
// another name that DNS rebinding pointed here, that name), and it keeps
// the cookies the node sets.
type visitor struct {
	t    *testing.T
	n    *testcluster.Node
	host string
	c    *http.Client
}

func newVisitor(t *testing.T, n *testcluster.Node, host string) *visitor {
	jar, _ := cookiejar.New(nil)
	return &visitor{t: t, n: n, host: host, c: &http.Client{Jar: jar, Timeout: hc.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (a *visitor) do(method, path, contentType, body string) (int, string) {
	a.t.Helper()
	req, _ := http.NewRequest(method, a.n.URL+path, strings.NewReader(body))
	req.Host = a.host
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := a.c.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The DNS rebinding attack on a node without auth, as it worked before the
// Host check: the page fetches the force-release form, posts it back with
// its form token, and releases the lease; the JSON API is as open. Now
// every step is refused with 421 and the lease stays held.
func TestDashboardRefusesARebindingPage(t *testing.T) {
	n := testcluster.StartNode(t, "")
	held := acquire(t, n, "jobs/report", "worker-1", "5ec4e75ec4e75ec4e75ec4e75ec4e75e")
	evil := newVisitor(t, n, "evil.example"+n.URL[strings.LastIndex(n.URL, ":"):])

	status, page := evil.do("GET", "/ui/force-release?resource=jobs/report", "", "")
	if status != http.StatusMisdirectedRequest || !strings.Contains(page, "--allow-host evil.example") {
		t.Errorf("the force-release form for Host evil.example: HTTP %d %.300s, want 421 naming --allow-host", status, page)
	}
	// The attack goes on with what the form gave, or with a form token of
	// its own making: the page's name is the attacker's, so are its cookies.
	csrf, id := strings.Repeat("a", 32), fmt.Sprint(held.Lease.ID)
	if m := csrfField.FindStringSubmatch(page); m != nil {
		csrf = m[1]
	}
	if m := leaseIDField.FindStringSubmatch(page); m != nil {
		id = m[1]
	}
	evil.c.Jar.SetCookies(&url.URL{Scheme: "http", Host: strings.TrimPrefix(n.URL, "http://"), Path: "/ui/"},
		[]*http.Cookie{{Name: "leasehold_csrf", Value: csrf, Path: "/ui/"}})
	form := url.Values{"csrf": {csrf}, "resource": {"jobs/report"}, "lease_id": {id}, "confirm": {"jobs/report"}, "reason": {"rebound"}}
	if status, body := evil.do("POST", "/ui/force-release", "application/x-www-form-urlencoded", form.Encode()); status != http.StatusMisdirectedRequest {
		t.Errorf("the posted force-release form for Host evil.example: HTTP %d %.300s, want 421", status, body)
	}
	api := fmt.Sprintf(`{"resource":"jobs/report","leaseId":"%s","reason":"rebound","requestId":"r-1"}`, id)
	if status, body := evil.do("POST", "/leasehold.v1.Admin/ForceRelease", "application/json", api); status != http.StatusMisdirectedRequest {
		t.Errorf("ForceRelease over the JSON API for Host evil.example: HTTP %d %.300s, want 421", status, body)
	}
	if _, body := call(t, n, "", "/leasehold.v1.Leases/Get", `{"resource":"jobs/report"}`, nil); !strings.Contains(body, "worker-1") {
		t.Fatalf("the rebinding page released the lease: %s", body)
	}
}

// A form whose browser says it came from another origin is refused before
// its form token is looked at, and changes nothing; from the dashboard's
// own origin, or from a client that is no browser (no Origin, no
// Sec-Fetch-Site), it is served.
func TestDashboardRefusesCrossOriginForms(t *testing.T) {
	n := startAuthNode(t)
	a := acquire(t, n, "jobs/report", "worker-1", "5ec4e75ec4e75ec4e75ec4e75ec4e75e")
	self := newVisitor(t, n, strings.TrimPrefix(n.URL, "http://"))
	status, page := self.do("GET", "/ui/login", "", "")
	m := csrfField.FindStringSubmatch(page)
	if status != http.StatusOK || m == nil {
		t.Fatalf("the login form: HTTP %d %.300s", status, page)
	}
	csrf := m[1]
	post := func(path string, v url.Values, headers ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", n.URL+path, strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for i := 0; i < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := self.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := post("/ui/login", url.Values{"csrf": {csrf}, "token": {adminTok}}, "Sec-Fetch-Site", "same-origin"); status != http.StatusSeeOther {
		t.Fatalf("login from the dashboard's own page: HTTP %d %.300s", status, body)
	}
	forced := url.Values{"csrf": {csrf}, "resource": {"jobs/report"}, "lease_id": {fmt.Sprint(a.Lease.ID)}, "confirm": {"jobs/report"}, "reason": {"origin test"}}
	for _, c := range []struct {
		name    string
		headers []string
	}{
		{"a page on another port of the same host", []string{"Sec-Fetch-Site", "same-site", "Origin", "http://127.0.0.1:1"}},
		{"a page on another site", []string{"Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"}},
		{"an older browser on another origin", []string{"Origin", "http://127.0.0.1:1"}},
	} {
		status, body := post("/ui/force-release", forced, c.headers...)
		if status != http.StatusForbidden || !strings.Contains(body, "came from another site") {
			t.Errorf("%s: HTTP %d %.300s, want 403", c.name, status, body)
		}
		if _, body := call(t, n, operatorTok, "/leasehold.v1.Leases/Get", `{"resource":"jobs/report"}`, nil); !strings.Contains(body, "worker-1") {
			t.Fatalf("%s: the form released the lease: %s", c.name, body)
		}
	}
	if status, body := post("/ui/logout", url.Values{"csrf": {csrf}}, "Sec-Fetch-Site", "cross-site"); status != http.StatusForbidden {
		t.Errorf("logout from another site: HTTP %d %.300s, want 403", status, body)
	}
	// The same form from the dashboard's origin, told by Origin alone (an
	// older browser), then by a client that sends neither header.
	if status, body := post("/ui/force-release", forced, "Origin", n.URL); status != http.StatusSeeOther {
		t.Fatalf("the form from the dashboard's own origin: HTTP %d %.300s, want 303", status, body)
	}
	b := acquire(t, n, "jobs/report", "worker-2", "5ec4e75ec4e75ec4e75ec4e75ec4e75e")
	forced.Set("lease_id", fmt.Sprint(b.Lease.ID))
	if status, body := post("/ui/force-release", forced); status != http.StatusSeeOther {
		t.Fatalf("the form from a client that is no browser: HTTP %d %.300s, want 303", status, body)
	}
}
