package ui_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/internal/testutil"
)

// requests counts the requests a browser tab sends, by path.
type requests struct {
	mu   sync.Mutex
	seen []string
}

// watchRequests starts counting ctx's tab's requests.
func watchRequests(t *testing.T, ctx context.Context) *requests {
	t.Helper()
	rs := &requests{}
	err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			rs.mu.Lock()
			rs.seen = append(rs.seen, e.Request.URL)
			rs.mu.Unlock()
		}
	})
	if err != nil { // chromedp enables the network domain of every tab
		t.Fatal(err)
	}
	return rs
}

// count is how many requests since mark went to a URL holding part.
func (rs *requests) count(mark int, part string) int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	n := 0
	for _, u := range rs.seen[min(mark, len(rs.seen)):] {
		if strings.Contains(u, part) {
			n++
		}
	}
	return n
}

func (rs *requests) mark() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.seen)
}

// open navigates to path and waits for sel.
func open(t *testing.T, ctx context.Context, n *testcluster.Node, path, sel string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(n.URL+path), chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
}

// eval runs js in the page.
func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return v
}

// waitJS waits (bounded) until js is true in the page.
func waitJS(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// hover moves the mouse over the right edge of the plot of the chart
// titled title in the element sel, and returns what its legend shows:
// the time and the value under the cursor.
func hover(t *testing.T, ctx context.Context, sel, title string) (at, value string) {
	t.Helper()
	fig := fmt.Sprintf(`document.querySelector(%q + ' figure[data-title=%q]')`, sel, title)
	box := eval[[]float64](t, ctx, fmt.Sprintf(`(() => { const r = %s.querySelector(".u-over").getBoundingClientRect();
		return [r.right - 2, r.top + r.height / 2]; })()`, fig))
	if err := chromedp.Do(ctx, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, box[0]-20, box[1]), chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, box[0], box[1])); err != nil {
		t.Fatal(err)
	}
	legend := fmt.Sprintf(`[...%s.querySelectorAll(".u-legend .u-value")].map(e => e.textContent)`, fig)
	waitJS(t, ctx, "the legend of "+title+" follows the cursor", legend+`[0] !== "—"`)
	v := eval[[]string](t, ctx, legend)
	return v[0], v[1]
}

var (
	clockTick = regexp.MustCompile(`^\d\d:\d\d(:\d\d)?$`)
	hhmmss    = regexp.MustCompile(`^\d\d:\d\d:\d\d$`)
)

// checkAxes checks the chart titled title in sel drew time labels on its
// x axis and numbers on its y axis.
func checkAxes(t *testing.T, ctx context.Context, sel, title string) {
	t.Helper()
	fig := fmt.Sprintf(`document.querySelector(%q + ' figure[data-title=%q]')`, sel, title)
	waitJS(t, ctx, title+" has drawn its axes", fig+`?.dataset.xTicks !== undefined && `+fig+`.dataset.yTicks !== undefined`)
	x := strings.Split(eval[string](t, ctx, fig+`.dataset.xTicks`), " | ")
	y := strings.Split(eval[string](t, ctx, fig+`.dataset.yTicks`), " | ")
	if len(x) < 3 || !clockTick.MatchString(x[0]) {
		t.Errorf("%s: the time axis reads %q, want clock times", title, x)
	}
	if len(y) < 2 || y[0] != "0" {
		t.Errorf("%s: the value axis reads %q, want numbers from 0", title, y)
	}
	if n := eval[int](t, ctx, fig+`.querySelectorAll("canvas").length`); n != 1 {
		t.Errorf("%s: %d canvases, want the one uPlot draws", title, n)
	}
}

// TestDashboardLiveInABrowser drives the live dashboard in a real headless
// Chromium against a real node with auth: the uPlot charts (axes, time,
// hover values; a queue's and a group's own), the event stream that
// updates a page without a request, the polling it falls back to when the
// stream is refused, runbook links, audit links by kind, a resource's
// timeline, and an election's term. Screenshots go to the test's
// artifacts (go test -artifacts); LEASEHOLD_SCREENSHOTS=docs/img writes
// the README's.
func TestDashboardLiveInABrowser(t *testing.T) {
	start := time.Now()
	newContext := browser(t)
	n := startAuthNode(t)
	const secret = "5ec4e75ec4e75ec4e75ec4e75ec4e75e"

	t.Run("charts have time and value axes and show values on hover", func(t *testing.T) {
		acquire(t, n, "charts/a", "worker-1", secret)
		acquire(t, n, "charts/b", "worker-1", secret)
		ctx := newContext()
		login(t, ctx, n, adminTok)
		open(t, ctx, n, "/ui/charts", "#charts figure canvas")
		checkAxes(t, ctx, "#charts", "Acquisitions")
		at, v := hover(t, ctx, "#charts", "Acquisitions")
		if !hhmmss.MatchString(at) || !regexp.MustCompile(`^\d+ per 10s$`).MatchString(v) {
			t.Fatalf("hovering the acquisitions chart shows time %q and value %q, want HH:MM:SS and N per 10s", at, v)
		}
		shot(t, ctx, "charts")

		// A queue's own charts: its depth and its oldest message.
		if status, b := call(t, n, adminTok, "/leasehold.v1.Queues/Create", `{"queue":"orders"}`, nil); status != http.StatusOK {
			t.Fatalf("create the queue: HTTP %d %s", status, b)
		}
		for i := range 3 {
			if status, b := call(t, n, workerTok, "/leasehold.v1.Queues/Send", fmt.Sprintf(`{"queue":"orders","key":"k%d","body":%q}`,
				i, base64.StdEncoding.EncodeToString([]byte("x"))), nil); status != http.StatusOK {
				t.Fatalf("send: HTTP %d %s", status, b)
			}
		}
		open(t, ctx, n, "/ui/queue?name=orders", "#queue-charts figure canvas")
		checkAxes(t, ctx, "#queue-charts", "Depth")
		checkAxes(t, ctx, "#queue-charts", "Oldest message age")
		if _, v := hover(t, ctx, "#queue-charts", "Depth"); v != "3 messages" {
			t.Fatalf("hovering the queue's depth now shows %q, want 3 messages", v)
		}
		shot(t, ctx, "queue-charts")

		// A group's rebalances.
		if status, b := call(t, n, operatorTok, "/leasehold.v1.Groups/Create", `{"group":"shards","partitions":4,"revokeTimeout":"10s"}`, nil); status != http.StatusOK {
			t.Fatalf("create the group: HTTP %d %s", status, b)
		}
		if status, b := call(t, n, workerTok, "/leasehold.v1.Groups/Join", `{"group":"shards","member":"worker-a","ttl":"30s"}`, nil); status != http.StatusOK {
			t.Fatalf("join: HTTP %d %s", status, b)
		}
		open(t, ctx, n, "/ui/group?name=shards", "#group-charts figure canvas")
		checkAxes(t, ctx, "#group-charts", "Rebalances")
	})

	t.Run("the event stream updates the leases table without a request", func(t *testing.T) {
		ctx := newContext()
		rs := watchRequests(t, ctx)
		login(t, ctx, n, adminTok)
		waitJS(t, ctx, "the page says it is live", `document.querySelector("#live").textContent.startsWith("Live")`)
		mark := rs.mark()
		acquire(t, n, "sse/pushed", "worker-sse", secret)
		pollText(t, ctx, "#lease-rows", "sse/pushed")
		// Two seconds more: a poll would have asked by now.
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) && rs.count(mark, "/ui/") == 0 {
			time.Sleep(100 * time.Millisecond)
		}
		if c := rs.count(mark, "/ui/"); c != 0 {
			t.Fatalf("the page sent %d requests to show the new lease; the stream should have pushed it: %v", c, rs.seen[mark:])
		}
		if c := rs.count(0, "/ui/events"); c != 1 {
			t.Fatalf("the page opened %d event streams, want 1", c)
		}
	})

	t.Run("a refused event stream falls back to polling", func(t *testing.T) {
		// alice holds every stream she may (her other tabs hold some):
		// the page's is refused (503).
		for i := 0; ; i++ {
			status, _, _ := openStream(t, streamClient, n, adminTok, "/ui/events?view=cluster")
			if status == http.StatusServiceUnavailable {
				break
			}
			if status != http.StatusOK || i == 8 {
				t.Fatalf("stream %d: HTTP %d, and none refused", i+1, status)
			}
		}
		ctx := newContext()
		rs := watchRequests(t, ctx)
		login(t, ctx, n, adminTok)
		waitJS(t, ctx, "the page says it polls", `document.querySelector("#live").textContent.startsWith("Polling")`)
		mark := rs.mark()
		acquire(t, n, "poll/shown", "worker-poll", secret)
		pollText(t, ctx, "#lease-rows", "poll/shown")
		testutil.Eventually(t, 10*time.Second, "the page polls its rows", func() (bool, string) {
			c := rs.count(mark, "/ui/leases/rows")
			return c >= 2, fmt.Sprintf("%d polls", c)
		})
		shot(t, ctx, "polling")
	})

	t.Run("runbook links land on their section", func(t *testing.T) {
		ctx := newContext()
		login(t, ctx, n, operatorTok)
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`a[href="/ui/runbook#orphaned-locks"]`)), chromedp.WaitVisible(chromedp.CSS("#runbook"))); err != nil {
			t.Fatal(err)
		}
		waitJS(t, ctx, "the runbook scrolled to the section", `location.hash === "#orphaned-locks" &&
			Math.abs(document.getElementById("orphaned-locks").getBoundingClientRect().top) < 50`)
		if h := text(t, ctx, "#orphaned-locks"); h != "Orphaned locks" {
			t.Fatalf("the section is headed %q", h)
		}
		if eval[string](t, ctx, `document.getElementById("orphaned-locks").tagName`) != "H2" {
			t.Fatal("the anchor is not the section's heading")
		}
		shot(t, ctx, "runbook")
	})

	t.Run("audit entries link to their kind's page", func(t *testing.T) {
		call(t, n, adminTok, "/leasehold.v1.Queues/Create", `{"queue":"audit-q"}`, nil)
		if status, b := call(t, n, adminTok, "/leasehold.v1.Queues/Purge", `{"queue":"audit-q","reason":"test purge"}`, nil); status != http.StatusOK {
			t.Fatalf("purge: HTTP %d %s", status, b)
		}
		call(t, n, operatorTok, "/leasehold.v1.Groups/Create", `{"group":"audit-g","partitions":2,"revokeTimeout":"10s"}`, nil)
		if status, b := call(t, n, adminTok, "/leasehold.v1.Groups/Delete", `{"group":"audit-g","reason":"test delete"}`, nil); status != http.StatusOK {
			t.Fatalf("delete the group: HTTP %d %s", status, b)
		}
		held := acquire(t, n, "audit/lease", "worker-a", secret)
		if status, b := call(t, n, adminTok, "/leasehold.v1.Admin/ForceRelease",
			fmt.Sprintf(`{"resource":"audit/lease","leaseId":"%d","reason":"test force"}`, held.Lease.ID), nil); status != http.StatusOK {
			t.Fatalf("force release: HTTP %d %s", status, b)
		}
		ctx := newContext()
		login(t, ctx, n, operatorTok)
		open(t, ctx, n, "/ui/audit", "#audit table")
		href := func(resource string) string {
			return eval[string](t, ctx, fmt.Sprintf(`[...document.querySelectorAll("#audit td a")].find(a => a.textContent === %q)?.getAttribute("href") ?? ""`, resource))
		}
		for resource, want := range map[string]string{"audit-q": "/ui/queue?name=audit-q", "audit-g": "/ui/group?name=audit-g", "audit/lease": "/ui/lease?resource=audit%2Flease"} {
			if got := href(resource); got != want {
				t.Errorf("the audit record of %s links %q, want %q", resource, got, want)
			}
		}
		shot(t, ctx, "audit-links")
		for _, c := range []struct{ href, heading string }{{"/ui/queue?name=audit-q", "Queue audit-q"}, {"/ui/lease?resource=audit%2Flease", "audit/lease"}} {
			open(t, ctx, n, "/ui/audit", "#audit table")
			submit(t, ctx, fmt.Sprintf(`#audit a[href=%q]`, c.href), "main h1")
			if h := text(t, ctx, "main h1"); h != c.heading {
				t.Errorf("the link %s opens a page headed %q, want %q", c.href, h, c.heading)
			}
		}
	})

	t.Run("a resource's timeline shows grants, renewals and a forced release, and grows live", func(t *testing.T) {
		held := acquire(t, n, "tl/job", "worker-tl", secret)
		for range 3 {
			if status, b := call(t, n, workerTok, "/leasehold.v1.Leases/Renew", fmt.Sprintf(`{"leaseId":"%d","secret":%q}`, held.Lease.ID, secret), nil); status != http.StatusOK {
				t.Fatalf("renew: HTTP %d %s", status, b)
			}
		}
		if status, b := call(t, n, adminTok, "/leasehold.v1.Admin/ForceRelease",
			fmt.Sprintf(`{"resource":"tl/job","leaseId":"%d","reason":"worker-tl hung"}`, held.Lease.ID), nil); status != http.StatusOK {
			t.Fatalf("force release: HTTP %d %s", status, b)
		}
		ctx := newContext()
		login(t, ctx, n, operatorTok)
		open(t, ctx, n, "/ui/lease?resource=tl/job", "#timeline")
		kinds := eval[[]string](t, ctx, `[...document.querySelectorAll("#timeline li")].map(li => li.dataset.kind + ": " + li.innerText.replace(/\s+/g, " "))`)
		if len(kinds) != 3 || !strings.HasPrefix(kinds[0], "force_released: ") || !strings.Contains(kinds[0], "by alice") ||
			!strings.Contains(kinds[0], "worker-tl hung") || !strings.Contains(kinds[1], "renewed ×3") || !strings.HasPrefix(kinds[2], "granted: ") {
			t.Fatalf("the timeline, newest first:\n%s\nwant the forced release (by alice, with its reason), renewed ×3, granted", strings.Join(kinds, "\n"))
		}
		eval[bool](t, ctx, `window.notReloaded = true`)
		acquire(t, n, "tl/job", "worker-next", secret)
		pollText(t, ctx, "#timeline li:first-child", "worker-next")
		if !eval[bool](t, ctx, `window.notReloaded === true`) {
			t.Fatal("the page was reloaded to show the new grant")
		}
		shot(t, ctx, "timeline")
	})

	t.Run("an election shows its term's age and renewal health", func(t *testing.T) {
		if status, body := call(t, n, workerTok, "/leasehold.v1.Elections/Campaign",
			`{"election":"sched/primary","value":"10.0.0.7:9000","ttl":"30s","owner":"sched-a"}`, nil); status != http.StatusOK {
			t.Fatalf("campaign: HTTP %d %s", status, body)
		}
		ctx := newContext()
		login(t, ctx, n, operatorTok)
		open(t, ctx, n, "/ui/elections", `tr[data-election="sched/primary"]`)
		row := `tr[data-election="sched/primary"]`
		if age := text(t, ctx, row+" .term-age"); !regexp.MustCompile(`^\d+(\.\d)?m?s$|^\d+m\d+s$`).MatchString(age) {
			t.Fatalf("the term age reads %q", age)
		}
		if h := text(t, ctx, row+" .health"); !strings.HasPrefix(h, "ok: ") || !strings.Contains(h, "TTL 30s") {
			t.Fatalf("the renewal health reads %q", h)
		}
		if strings.Contains(text(t, ctx, "#elections"), "Expires in") {
			t.Fatal(`the elections table still has "Expires in"`)
		}
		shot(t, ctx, "elections")
	})
	// About 40 s with -race on an idle machine; the bound leaves a loaded
	// one room and still catches a wait that runs to its timeout.
	if d := time.Since(start); d > 90*time.Second {
		t.Errorf("the live browser tests took %v; keep them near 40 s", d)
	}
}
