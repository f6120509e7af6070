package ui_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/internal/testutil"
)

// A follower's dashboard shows the whole cluster, and a forced release
// made there reaches the leader like any API call: the dashboard calls
// the API in process, forwarding included.
func TestDashboardOnAFollower(t *testing.T) {
	c := testcluster.Start(t, 3)
	leader := c.Leader()
	follower := (leader + 1) % 3
	fURL := c.URL(follower)
	ln := c.Node(leader)
	var a acquired
	if status, body := call(t, ln, "", "/leasehold.v1.Leases/Acquire",
		`{"resources":["jobs/far"],"ttl":"60s","owner":"far-worker"}`, &a); status != http.StatusOK {
		t.Fatalf("acquire: HTTP %d %s", status, body)
	}

	testutil.Eventually(t, 10*time.Second, "the follower's cluster view shows three nodes, one leading", func() (bool, string) {
		_, body := get(t, c.Node(follower), "", "/ui/cluster/rows")
		ok := strings.Count(body, "<tr>") == 3 && strings.Count(body, "Leader</td>") == 1 && strings.Count(body, "Follower</td>") == 2
		for i := range 3 {
			ok = ok && strings.Contains(body, ">"+c.ID(i)+"<")
		}
		return ok, body
	})

	jar, _ := cookiejar.New(nil)
	br := &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var page string
	testutil.Eventually(t, 10*time.Second, "the follower's forced-release form for jobs/far", func() (bool, string) {
		resp, err := br.Get(fURL + "/ui/force-release?resource=jobs/far")
		if err != nil {
			return false, err.Error()
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		page = string(b)
		return strings.Contains(page, `id="force-button"`), page
	})
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no form token:\n%s", page)
	}
	resp, err := br.PostForm(fURL+"/ui/force-release", url.Values{"csrf": {m[1]}, "resource": {"jobs/far"},
		"lease_id": {fmt.Sprint(a.Lease.ID)}, "confirm": {"jobs/far"}, "reason": {"from a follower"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("forced release on a follower: HTTP %d:\n%s", resp.StatusCode, b)
	}
	if _, body := call(t, ln, "", "/leasehold.v1.Leases/Get", `{"resource":"jobs/far"}`, nil); strings.Contains(body, "far-worker") {
		t.Fatalf("the leader still has jobs/far held: %s", body)
	}
	testutil.Eventually(t, 10*time.Second, "the follower's audit view shows the forced release", func() (bool, string) {
		_, body := get(t, c.Node(follower), "", "/ui/audit?resource=jobs/far")
		return strings.Contains(body, "from a follower") && strings.Contains(body, "force-release"), body
	})
}
