package ui_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/service"
	"github.com/leasehold/leasehold/ui"
)

// TestDashboardScreenshots writes the README's screenshots of the charts
// and the timeline (LEASEHOLD_SCREENSHOTS=../docs/img, a folder relative
// to ui/): a real node under a minute of load, its dashboard sampling
// every 250 ms instead of 10 s so the charts fill in that minute.
func TestDashboardScreenshots(t *testing.T) {
	dir := os.Getenv("LEASEHOLD_SCREENSHOTS")
	if dir == "" {
		t.Skip("set LEASEHOLD_SCREENSHOTS to the folder the README's screenshots go to (../docs/img)")
	}
	newContext := browser(t)
	n := testcluster.StartNode(t, "")
	dash, err := ui.New(ui.Config{API: n.Server.Handler(), Metrics: n.Registry, SampleEvery: 250 * time.Millisecond, Samples: 240,
		Identify:        func(string) (ui.Viewer, error) { return ui.Viewer{Name: "admin", CanView: true, CanAct: true}, nil },
		GroupRebalances: func(limit int) map[string]uint64 { return service.GroupRebalances(n.Cluster, limit) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	sampled := make(chan struct{})
	go func() { defer close(sampled); dash.Sample(ctx) }()
	srv := httptest.NewServer(dash)
	defer func() { stop(); <-sampled; srv.Close() }()

	call(t, n, "", "/leasehold.v1.Queues/Create", `{"queue":"orders"}`, nil)
	call(t, n, "", "/leasehold.v1.Groups/Create", `{"group":"shards","partitions":8,"revokeTimeout":"10s"}`, nil)
	body := base64.StdEncoding.EncodeToString([]byte("order"))
	held := acquire(t, n, "jobs/nightly", "worker-1", "5ec4e75ec4e75ec4e75ec4e75ec4e75e")
	for i := range 240 { // a minute of load, at 250 ms a step
		for j := range i % 5 {
			r := fmt.Sprintf("jobs/%d", (i+j)%7)
			var a acquired
			if status, _ := call(t, n, "", "/leasehold.v1.Leases/Acquire", fmt.Sprintf(`{"resources":[%q],"ttl":"2s"}`, r), &a); status == http.StatusOK && j%2 == 0 {
				call(t, n, "", "/leasehold.v1.Leases/Release", fmt.Sprintf(`{"leaseId":"%d","secret":%q}`, a.Lease.ID, a.Secret), nil)
			}
		}
		if i%3 != 2 {
			call(t, n, "", "/leasehold.v1.Queues/Send", fmt.Sprintf(`{"queue":"orders","key":"customer-%d","body":%q}`, i%9, body), nil)
		}
		if i%4 == 0 {
			call(t, n, "", "/leasehold.v1.Queues/Receive", `{"queue":"orders","max":3,"consumer":"billing-1"}`, nil)
		}
		if i%40 == 10 {
			call(t, n, "", "/leasehold.v1.Groups/Join", fmt.Sprintf(`{"group":"shards","member":"worker-%d","ttl":"30s"}`, i/40), nil)
		}
		if i%20 == 0 {
			call(t, n, "", "/leasehold.v1.Leases/Renew", fmt.Sprintf(`{"leaseId":"%d","secret":%q,"progress":"rows 1-%d000 written"}`,
				held.Lease.ID, "5ec4e75ec4e75ec4e75ec4e75ec4e75e", i/20), nil)
		}
		time.Sleep(250 * time.Millisecond) // the load's pace, not a wait for a condition
	}
	call(t, n, "", "/leasehold.v1.Admin/ForceRelease", fmt.Sprintf(`{"resource":"jobs/nightly","leaseId":"%d","reason":"worker-1 hung on the export"}`, held.Lease.ID), nil)
	acquire(t, n, "jobs/nightly", "worker-2", "6ec4e75ec4e75ec4e75ec4e75ec4e75e")

	tab := newContext()
	for _, s := range []struct{ path, sel, file string }{
		{"/ui/charts", "#charts", "dashboard-charts.png"},
		{"/ui/queue?name=orders", "#queue-charts", "dashboard-queue.png"},
		{"/ui/lease?resource=jobs/nightly", "#timeline", "dashboard-timeline.png"},
	} {
		if err := chromedp.Do(tab, chromedp.Navigate(srv.URL+s.path), chromedp.WaitVisible(chromedp.CSS(s.sel))); err != nil {
			t.Fatal(err)
		}
		js := `document.querySelector("#live")?.textContent.startsWith("Live") && (document.querySelector(".charts") === null || document.querySelectorAll("canvas").length > 0)`
		if _, err := chromedp.Run(tab, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
			t.Fatal(err)
		}
		if s.sel != "#timeline" { // the values under the cursor
			hover(t, tab, s.sel, map[string]string{"#charts": "Acquisitions", "#queue-charts": "Depth"}[s.sel])
		}
		png, err := chromedp.Run(tab, chromedp.Screenshot(chromedp.CSS("main")))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, s.file), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
