package ui_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/server"
)

// The names the test browser resolves to 127.0.0.1 (see browser): one
// that a rebinding DNS server pointed at the node, and one the node is
// told it is reached by (--allow-host).
const (
	rebound     = "evil.example"
	allowedName = "leasehold.example"
)

// nodeAs is n's URL under another host name, same port.
func nodeAs(n *testcluster.Node, name string) string {
	return "http://" + name + n.URL[strings.LastIndex(n.URL, ":"):]
}

// In a real browser, a node without auth refuses its dashboard to a page
// on a name that DNS rebinding pointed at it, and serves it, a forced
// release included, by a name it was given.
func TestBrowserHostNames(t *testing.T) {
	newContext := browser(t)
	n := testcluster.StartServerNode(t, func(c *server.Config) { c.AllowHosts = []string{allowedName} })
	acquire(t, n, "jobs/report", "worker-1", "5ec4e75ec4e75ec4e75ec4e75ec4e75e")
	held := func() bool {
		_, body := call(t, n, "", "/leasehold.v1.Leases/Get", `{"resource":"jobs/report"}`, nil)
		return strings.Contains(body, "worker-1")
	}

	ctx := newContext()
	if err := chromedp.Do(ctx, chromedp.Navigate(nodeAs(n, rebound)+"/ui/force-release?resource=jobs/report")); err != nil {
		t.Fatal(err)
	}
	body := text(t, ctx, "body")
	shot(t, ctx, "rebound")
	if !strings.Contains(body, "--allow-host "+rebound) || has(t, ctx, "#force") {
		t.Fatalf("the dashboard by the rebound name %s shows:\n%.600s", rebound, body)
	}
	if !held() {
		t.Fatal("the lease is gone")
	}

	ctx = newContext()
	err := chromedp.Do(ctx, chromedp.Navigate(nodeAs(n, allowedName)+"/ui/force-release?resource=jobs/report"),
		chromedp.WaitVisible(chromedp.CSS("#force")))
	if err != nil {
		t.Fatalf("the dashboard by the allowed name %s: %v", allowedName, err)
	}
	fill(t, ctx, "#confirm", "jobs/report")
	fill(t, ctx, "#reason", "worker-1 hung")
	submit(t, ctx, "#force-button", "#forced-record")
	if held() {
		t.Fatal("a forced release from the dashboard's own page by an allowed name left the lease held")
	}
}

// A page on another port of the node's host is same-site, so the browser
// sends it the session cookie (SameSite=Strict), and it may set the form
// token's cookie for the node's host (cookies ignore ports): it posts a
// forced release whose form token matches the cookie it set. The Origin
// check refuses it, and the lease stays held.
func TestBrowserRefusesAFormFromAnotherPort(t *testing.T) {
	newContext := browser(t)
	n := startAuthNode(t)
	a := acquire(t, n, "jobs/report", "worker-1", "5ec4e75ec4e75ec4e75ec4e75ec4e75e")
	const csrf = "0123456789abcdef0123456789abcdef"
	page := fmt.Sprintf(`<!doctype html><form id="f" method="POST" action="%s/ui/force-release">
<input name="csrf" value="%s"><input name="resource" value="jobs/report"><input name="lease_id" value="%d">
<input name="confirm" value="jobs/report"><input name="reason" value="from another port">
</form><script>document.getElementById("f").submit()</script>`, n.URL, csrf, a.Lease.ID)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "leasehold_csrf", Value: csrf, Path: "/ui/", HttpOnly: true})
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(page))
	}))
	defer other.Close()

	ctx := newContext()
	login(t, ctx, n, adminTok)
	if err := chromedp.Do(ctx, chromedp.Navigate(other.URL)); err != nil {
		t.Fatal(err)
	}
	// The form posts itself: wait for the node's answer to load.
	js := fmt.Sprintf(`location.href.startsWith(%q) && document.readyState === "complete"`, n.URL)
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("the page on another port did not post its form to the node: %v", err)
	}
	body := text(t, ctx, "body")
	shot(t, ctx, "form-from-another-port")
	if _, lease := call(t, n, operatorTok, "/leasehold.v1.Leases/Get", `{"resource":"jobs/report"}`, nil); !strings.Contains(lease, "worker-1") {
		t.Fatalf("the form from another port released the lease; the page shows:\n%.400s", body)
	}
	if !strings.Contains(body, "came from another site") {
		t.Fatalf("the refusal does not say why:\n%.400s", body)
	}
}
