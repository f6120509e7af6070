package ui_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/internal/testutil"
)

// One resource in full: its holder, the acquire waiting for it, and its
// timeline (watch events); the leases table filters by prefix.
func TestDashboardResourcePageShowsWaitersAndHistory(t *testing.T) {
	n := startAuthNode(t)
	const secret = "5ec4e75ec4e75ec4e75ec4e75ec4e75e"
	a := acquire(t, n, "jobs/busy", "first-holder", secret)
	acquire(t, n, "other/thing", "elsewhere", "00112233445566778899aabbccddeeff")
	waited := make(chan string, 1)
	go func() {
		req := `{"resources":["jobs/busy"],"ttl":"60s","wait":"30s","owner":"patient-waiter","operation":"second-run",` +
			`"requestId":"wait-1","secret":"ffeeddccbbaa99887766554433221100"}`
		status, body := call(t, n, workerTok, "/leasehold.v1.Leases/Acquire", req, nil)
		waited <- fmt.Sprintf("HTTP %d %s", status, body)
	}()
	testutil.Eventually(t, 10*time.Second, "the resource page shows the waiter", func() (bool, string) {
		_, body := get(t, n, operatorTok, "/ui/lease?resource=jobs/busy")
		return strings.Contains(body, `id="waiters"`) && strings.Contains(body, "patient-waiter") && strings.Contains(body, "second-run"), body
	})
	status, body := get(t, n, operatorTok, "/ui/lease?resource=jobs/busy")
	if status != http.StatusOK || !strings.Contains(body, "first-holder") {
		t.Fatalf("the resource page: HTTP %d:\n%s", status, body)
	}
	_, events, _ := strings.Cut(body, `id="timeline"`)
	if !strings.Contains(events, `data-kind="granted"`) || !strings.Contains(events, `data-kind="queued"`) {
		t.Fatalf("the timeline lacks the grant and the queued acquire:\n%s", events)
	}
	_, rows := get(t, n, operatorTok, "/ui/leases/rows?prefix=jobs/")
	if !strings.Contains(rows, "jobs/busy") || strings.Contains(rows, "other/thing") {
		t.Fatalf("the rows under prefix jobs/:\n%s", rows)
	}
	if !strings.Contains(rows, ">1</td>") {
		t.Fatalf("the row of jobs/busy does not count its waiter:\n%s", rows)
	}

	// Released, the waiter is granted; the history shows both leases.
	call(t, n, workerTok, "/leasehold.v1.Leases/Release", fmt.Sprintf(`{"leaseId":"%d","secret":%q}`, a.Lease.ID, secret), nil)
	select {
	case got := <-waited:
		if !strings.HasPrefix(got, "HTTP 200") {
			t.Fatalf("the waiter: %s", got)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter was not granted within 20s of the release")
	}
	_, body = get(t, n, operatorTok, "/ui/lease?resource=jobs/busy")
	_, events, _ = strings.Cut(body, `id="timeline"`)
	if !strings.Contains(events, `data-kind="released"`) || !strings.Contains(events, "patient-waiter") {
		t.Fatalf("after the release the timeline lacks it or the new grant:\n%s", events)
	}
}

// A resource's page does not wait out the history's time limit: the
// watch it reads gives no sign of having caught up, so a pause ends it.
func TestDashboardResourcePageAnswersPromptly(t *testing.T) {
	n := testcluster.StartNode(t, "")
	for i := range 3 {
		call(t, n, "", "/leasehold.v1.Leases/Acquire", fmt.Sprintf(`{"resources":["jobs/%d"],"ttl":"60s"}`, i), nil)
	}
	for _, r := range []string{"jobs/1", "never/used"} {
		start := time.Now()
		status, body := get(t, n, "", "/ui/lease?resource="+r)
		// The history's limit is 3s; its pause 100ms. 1.5s leaves a loaded
		// machine room and still tells the two apart.
		if d := time.Since(start); status != http.StatusOK || d > 1500*time.Millisecond {
			t.Fatalf("GET the page of %s: HTTP %d in %v:\n%.300s", r, status, d, body)
		}
	}
}
