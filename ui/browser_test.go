package ui_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/leasehold/leasehold/fence/httpfence"
	"github.com/leasehold/leasehold/internal/testcluster"
)

// browser starts a headless Chromium (Debian's chromium package) for the
// test and returns a function that opens a fresh, cookie-less browser
// context in it. Without chromium the test is skipped, except in CI
// (CI=true), where it fails: .ci/run installs it.
func browser(t *testing.T) func() context.Context {
	t.Helper()
	var path string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed; .ci/run installs it (apt-get install chromium)")
		}
		t.Skip("chromium is not installed (apt-get install chromium); the browser tests need it")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-pings", true),
		// Loopback only: nothing may leave the machine. The test names
		// resolve to loopback, as a rebinding DNS server would answer.
		chromedp.Flag("host-resolver-rules", "MAP "+rebound+" 127.0.0.1, MAP "+allowedName+" 127.0.0.1, MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	root, cancelRoot := chromedp.NewContext(alloc)
	if err := chromedp.Do(root); err != nil { // starts the browser
		cancelRoot()
		cancelAlloc()
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() { cancelRoot(); cancelAlloc() })
	return func() context.Context {
		ctx, cancel := chromedp.NewContext(root, chromedp.WithNewBrowserContext())
		ctx, cancelT := context.WithTimeout(ctx, 30*time.Second)
		t.Cleanup(func() { cancelT(); cancel() })
		return ctx
	}
}

// shot saves a screenshot of the page under the test's artifact
// directory (kept with go test -artifacts).
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// login opens the dashboard, is shown the login form, and logs in.
func login(t *testing.T, ctx context.Context, n *testcluster.Node, token string) {
	t.Helper()
	err := chromedp.Do(ctx,
		chromedp.Navigate(n.URL+"/ui/leases"),
		chromedp.WaitVisible(chromedp.CSS("#login")),
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#login-button")),
		chromedp.WaitVisible(chromedp.CSS("#leases")),
	)
	if err != nil {
		t.Fatalf("log in: %v", err)
	}
}

// text is the visible text of the first element matching sel.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// pollText waits (bounded by ctx) until the element sel's text holds want.
func pollText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	js := fmt.Sprintf(`(document.querySelector(%q)?.innerText ?? "").includes(%q)`, sel, want)
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q)?.innerText ?? "(none)"`, sel)))
		t.Fatalf("%s never showed %q: %v; it shows:\n%s", sel, want, err, got)
	}
}

// submit clicks button and waits until a new page has loaded that holds
// the element want (the old page's copy does not count).
func submit(t *testing.T, ctx context.Context, button, want string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.oldPage = true`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(button))); err != nil {
		t.Fatalf("click %s: %v", button, err)
	}
	// Polled from here, not in the page: a navigation ends any script
	// that waits inside the old page.
	js := fmt.Sprintf(`!window.oldPage && document.readyState === "complete" && document.querySelector(%q) !== null`, want)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after clicking %s, no page with %s within 10s (last error: %v)", button, want, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fill sets a form field's value (chromedp's SetValue refuses "").
func fill(t *testing.T, ctx context.Context, sel, value string) {
	t.Helper()
	js := fmt.Sprintf(`(document.querySelector(%q).value = %q) !== null`, sel, value)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil {
		t.Fatalf("fill %s: %v", sel, err)
	}
}

func has(t *testing.T, ctx context.Context, sel string) bool {
	t.Helper()
	ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`document.querySelector(%q) !== null`, sel)))
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestDashboardInABrowser drives the dashboard in a real headless Chromium
// against a real node with auth: the login wall, the live leases table,
// a forced release from the risk text to the audit record and the
// ex-holder's refused fenced write, and an operator who may look but not
// act. Every view is screenshotted.
func TestDashboardInABrowser(t *testing.T) {
	start := time.Now()
	newContext := browser(t)
	n := startAuthNode(t)
	const secret = "5ec4e75ec4e75ec4e75ec4e75ec4e75e"
	holder := acquire(t, n, "jobs/report", "worker-1", secret)
	// worker-1 is active: it renews with progress until a renewal is
	// refused, and reports that refusal.
	lost := make(chan string, 1)
	stopWorker := make(chan struct{})
	defer close(stopWorker)
	go func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for i := 1; ; i++ {
			body := fmt.Sprintf(`{"leaseId":"%d","secret":%q,"progress":"rows 1-%d000 written"}`, holder.Lease.ID, secret, i)
			req, _ := http.NewRequest("POST", n.URL+"/leasehold.v1.Leases/Renew", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+workerTok)
			resp, err := hc.Do(req)
			if err != nil {
				lost <- err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				lost <- fmt.Sprintf("HTTP %d %s", resp.StatusCode, b)
				return
			}
			select {
			case <-stopWorker:
				return
			case <-tick.C:
			}
		}
	}()

	t.Run("no token sees the login form and no data", func(t *testing.T) {
		ctx := newContext()
		err := chromedp.Do(ctx, chromedp.Navigate(n.URL+"/ui/lease?resource=jobs/report"), chromedp.WaitVisible(chromedp.CSS("#login")))
		if err != nil {
			t.Fatal(err)
		}
		body := text(t, ctx, "body")
		shot(t, ctx, "login")
		for _, leak := range []string{"worker-1", "nightly-report", "rows 1-"} {
			if strings.Contains(body, leak) {
				t.Errorf("the login page shows %q:\n%s", leak, body)
			}
		}
	})

	t.Run("the leases table updates without a reload", func(t *testing.T) {
		ctx := newContext()
		login(t, ctx, n, adminTok)
		// A reload would lose this mark.
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.notReloaded = true`)); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(text(t, ctx, "#lease-rows"), "jobs/live") {
			t.Fatal("jobs/live is shown before anyone acquired it")
		}
		acquire(t, n, "jobs/live", "worker-2", "00112233445566778899aabbccddeeff")
		pollText(t, ctx, "#lease-rows", "jobs/live")
		pollText(t, ctx, "#lease-rows", "worker-2")
		if same, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.notReloaded === true`)); err != nil || !same {
			t.Fatalf("the page was reloaded to show the new lease (%v)", err)
		}
		shot(t, ctx, "leases")
	})

	t.Run("a forced release shows the risk first, needs the name and a reason, and is audited", func(t *testing.T) {
		// The protected resource: an HTTP service that refuses stale tokens.
		store := &httpfence.MemoryStore{}
		writes := httptest.NewServer(httpfence.Middleware(store)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("written\n"))
		})))
		defer writes.Close()
		write := func(token uint64) int {
			t.Helper()
			req, _ := http.NewRequest("POST", writes.URL, nil)
			v, _ := httpfence.Format("jobs/report", token)
			req.Header.Set("Leasehold-Fence", v)
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if c := write(holder.Lease.Token); c != http.StatusOK {
			t.Fatalf("the holder's own write: HTTP %d", c)
		}

		ctx := newContext()
		login(t, ctx, n, adminTok)
		err := chromedp.Do(ctx, chromedp.Navigate(n.URL+"/ui/lease?resource=jobs/report"),
			chromedp.WaitVisible(chromedp.CSS("#holder")))
		if err != nil {
			t.Fatal(err)
		}
		shot(t, ctx, "lease")
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#force-link")), chromedp.WaitVisible(chromedp.CSS("#force"))); err != nil {
			t.Fatal(err)
		}
		shot(t, ctx, "force-release")
		risk := text(t, ctx, "#risk")
		if !strings.Contains(risk, "Forcing a release does not stop the holder") || !strings.Contains(risk, "two holders at once") {
			t.Fatalf("the risk text is not shown:\n%s", risk)
		}
		for _, want := range []string{"worker-1", "rows 1-", "000 written", "Expires in"} {
			if h := text(t, ctx, "#holder"); !strings.Contains(h, want) {
				t.Errorf("the holder's details lack %q:\n%s", want, h)
			}
		}
		riskFirst, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!(document.querySelector("#risk").compareDocumentPosition(
			document.querySelector("#force-button")) & Node.DOCUMENT_POSITION_FOLLOWING)`))
		if !riskFirst {
			t.Fatal("the risk text does not come before the button")
		}

		// Refused: no typed name, then a wrong one, then no reason.
		for _, c := range []struct{ confirm, reason, want string }{
			{"", "worker hung", "type the resource name"},
			{"jobs/repor", "worker hung", "type the resource name"},
			{"jobs/report", "", "give a reason"},
		} {
			fill(t, ctx, "#confirm", c.confirm)
			fill(t, ctx, "#reason", c.reason)
			submit(t, ctx, "#force-button", "#error")
			if e := text(t, ctx, "#error"); !strings.Contains(e, c.want) || !strings.Contains(e, "Nothing was released") {
				t.Fatalf("confirm %q, reason %q: the error says %q, want %q", c.confirm, c.reason, e, c.want)
			}
			if !has(t, ctx, "#risk") {
				t.Fatal("the refused form no longer shows the risk text")
			}
			if status, body := call(t, n, operatorTok, "/leasehold.v1.Leases/Get", `{"resource":"jobs/report"}`, nil); status != http.StatusOK || !strings.Contains(body, "worker-1") {
				t.Fatalf("after a refused form the lease is not held by worker-1: HTTP %d %s", status, body)
			}
		}
		shot(t, ctx, "force-release-refused")

		fill(t, ctx, "#confirm", "jobs/report")
		fill(t, ctx, "#reason", "worker-1 hung on the export")
		submit(t, ctx, "#force-button", "#forced-record")
		rec := text(t, ctx, "#forced-record")
		for _, want := range []string{"alice", fmt.Sprintf("lease %d", holder.Lease.ID), "worker-1", "worker-1 hung on the export"} {
			if !strings.Contains(rec, want) {
				t.Errorf("the audit record shown lacks %q: %s", want, rec)
			}
		}
		if strings.Contains(text(t, ctx, "#holder"), "worker-1") {
			t.Error("the page still shows worker-1 as the holder")
		}
		shot(t, ctx, "forced")

		// The active worker learns of it at its next renewal.
		select {
		case why := <-lost:
			if !strings.Contains(why, "HTTP 404") || !strings.Contains(why, "not_found") {
				t.Fatalf("worker-1's renewal after the forced release: %s", why)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("worker-1 went on renewing for 10s after its lease was forced off")
		}
		// The next holder writes; the ex-holder, still running, is refused.
		next := acquire(t, n, "jobs/report", "worker-3", "ffeeddccbbaa99887766554433221100")
		if c := write(next.Lease.Token); c != http.StatusOK {
			t.Fatalf("the next holder's write: HTTP %d", c)
		}
		if c := write(holder.Lease.Token); c != http.StatusConflict {
			t.Fatalf("the ex-holder's write with token %d after the forced release: HTTP %d, want 409", holder.Lease.Token, c)
		}
		// And leasehold's own fence refuses it too, which the charts show.
		if status, body := call(t, n, workerTok, "/leasehold.v1.KV/CheckFence",
			fmt.Sprintf(`{"resource":"jobs/report","token":"%d"}`, holder.Lease.Token), nil); status != http.StatusConflict {
			t.Fatalf("leasehold's fence check of the old token: HTTP %d %s", status, body)
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(n.URL+"/ui/charts"), chromedp.WaitVisible(chromedp.CSS("#charts"))); err != nil {
			t.Fatal(err)
		}
		// Within the hour the charts cover (the step of each may have
		// passed: "max").
		for _, title := range []string{"Fence rejections", "Forced releases", "Renewal failures"} {
			pollText(t, ctx, fmt.Sprintf(`#charts figure[data-title=%q] figcaption`, title), "(max 1)")
		}
		shot(t, ctx, "charts")
		if err := chromedp.Do(ctx, chromedp.Navigate(n.URL+"/ui/audit"), chromedp.WaitVisible(chromedp.CSS("#audit"))); err != nil {
			t.Fatal(err)
		}
		pollText(t, ctx, "#audit", "worker-1 hung on the export")
		shot(t, ctx, "audit")
		// A barrier whose first phase tripped, for its row.
		for _, body := range []string{`{"name":"jobs/phase","kind":"BARRIER_KIND_LATCH","parties":1}`, `{"name":"jobs/phase"}`} {
			proc := "/leasehold.v1.Barriers/Create"
			if !strings.Contains(body, "kind") {
				proc = "/leasehold.v1.Barriers/CountDown"
			}
			if status, body := call(t, n, workerTok, proc, body, nil); status != http.StatusOK {
				t.Fatalf("%s: HTTP %d %s", proc, status, body)
			}
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(n.URL+"/ui/barriers"), chromedp.WaitVisible(chromedp.CSS("#barriers"))); err != nil {
			t.Fatal(err)
		}
		pollText(t, ctx, "#barriers", "phase 1 tripped")
		for _, view := range []string{"elections", "idempotency", "queues", "groups", "barriers", "cluster"} {
			if err := chromedp.Do(ctx, chromedp.Navigate(n.URL+"/ui/"+view), chromedp.WaitVisible(chromedp.CSS("main"))); err != nil {
				t.Fatal(err)
			}
			shot(t, ctx, view)
		}
		pollText(t, ctx, "#cluster-rows", "Leader")
	})

	t.Run("an operator sees but cannot force a release", func(t *testing.T) {
		op := acquire(t, n, "jobs/op", "worker-4", "0123456789abcdef0123456789abcdef")
		ctx := newContext()
		login(t, ctx, n, operatorTok)
		pollText(t, ctx, "#lease-rows", "jobs/op")
		if err := chromedp.Do(ctx, chromedp.Navigate(n.URL+"/ui/lease?resource=jobs/op"), chromedp.WaitVisible(chromedp.CSS("#holder"))); err != nil {
			t.Fatal(err)
		}
		if has(t, ctx, "#force-link") {
			t.Fatal("an operator is offered the forced release")
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(n.URL+"/ui/force-release?resource=jobs/op"), chromedp.WaitVisible(chromedp.CSS("#not-admin"))); err != nil {
			t.Fatal(err)
		}
		if has(t, ctx, "#force-button") {
			t.Fatal("an operator is shown the forced-release button")
		}
		shot(t, ctx, "operator-force-release")

		// The POST itself, from the operator's own session with its form
		// token (the logout form carries one): the API refuses it.
		post := fmt.Sprintf(`fetch("/ui/force-release", {method: "POST", body: new URLSearchParams({
			csrf: document.querySelector("input[name=csrf]").value, resource: "jobs/op", lease_id: "%d",
			confirm: "jobs/op", reason: "operator tries"})}).then(async r => r.status + " " + await r.text())`, op.Lease.ID)
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](post, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(got, "403 ") || !strings.Contains(got, "permission_denied") {
			t.Fatalf("the operator's forced release was answered %.300s", got)
		}
		if status, body := call(t, n, operatorTok, "/leasehold.v1.Leases/Get", `{"resource":"jobs/op"}`, nil); status != http.StatusOK || !strings.Contains(body, "worker-4") {
			t.Fatalf("after the operator's refused POST, jobs/op is not held by worker-4: HTTP %d %s", status, body)
		}
	})
	if d := time.Since(start); d > 60*time.Second {
		t.Errorf("the browser tests took %v; keep them under a minute", d)
	}
}
