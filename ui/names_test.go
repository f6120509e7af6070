package ui_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// A group member's session, in a real browser: the group page's link to
// its session and the leases table's link to its resource both open the
// session's page, and its forced release goes through there as any
// lease's (the typed confirmation is its printable name).
func TestDashboardLinksAGroupSession(t *testing.T) {
	newContext := browser(t)
	n := startAuthNode(t)
	if status, body := call(t, n, adminTok, "/leasehold.v1.Groups/Create", `{"group":"shards","partitions":2}`, nil); status != http.StatusOK {
		t.Fatalf("create the group: HTTP %d %s", status, body)
	}
	var joined acquired
	if status, body := call(t, n, workerTok, "/leasehold.v1.Groups/Join", `{"group":"shards","member":"worker-1","ttl":"3600s"}`, &joined); status != http.StatusOK {
		t.Fatalf("join: HTTP %d %s", status, body)
	}
	const name = "@leasehold/group/shards/worker-1"
	lease := fmt.Sprint(joined.Lease.ID)
	ctx := newContext()
	login(t, ctx, n, adminTok)

	// openedBy follows the link sel and checks that the session's page
	// opened: its holder is the session's lease.
	openedBy := func(page, sel string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(n.URL+page), chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
			t.Fatalf("%s: no link %s: %v", page, sel, err)
		}
		submit(t, ctx, sel, "#holder")
		if h := text(t, ctx, "#holder"); !strings.Contains(h, lease) || !strings.Contains(h, "worker-1") {
			t.Fatalf("the link %s on %s opened a page whose holder is:\n%s", sel, page, h)
		}
		if h1 := text(t, ctx, "h1"); !strings.Contains(h1, name) {
			t.Fatalf("the page opened by %s on %s is titled %q, want %q", sel, page, h1, name)
		}
	}
	openedBy("/ui/group?name=shards", "#members a")
	openedBy("/ui/leases", `#lease-rows a[href*="worker-1"]`)
	shot(t, ctx, "group-session")

	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#force-link")), chromedp.WaitVisible(chromedp.CSS("#force"))); err != nil {
		t.Fatal(err)
	}
	fill(t, ctx, "#confirm", name)
	fill(t, ctx, "#reason", "stuck member")
	submit(t, ctx, "#force-button", "#forced")
	if rec := text(t, ctx, "#forced-record"); !strings.Contains(rec, "lease "+lease) || !strings.Contains(rec, name) {
		t.Fatalf("the forced release's record: %s", rec)
	}
	if status, body := call(t, n, adminTok, "/leasehold.v1.Groups/Get", `{"group":"shards"}`, nil); status != http.StatusOK || strings.Contains(body, "worker-1") {
		t.Fatalf("after the forced release the group still has worker-1: HTTP %d %s", status, body)
	}
}
