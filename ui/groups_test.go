package ui_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
)

// The groups view lists each group's partitions, members and pending
// revocations; a group's page who owns which partition at which epoch.
func TestDashboardGroups(t *testing.T) {
	n := startAuthNode(t)
	if status, b := call(t, n, operatorTok, "/leasehold.v1.Groups/Create", `{"group":"shards","partitions":4,"revokeTimeout":"10s"}`, nil); status != http.StatusOK {
		t.Fatalf("create: HTTP %d %s", status, b)
	}
	if status, b := call(t, n, workerTok, "/leasehold.v1.Groups/Join", `{"group":"shards","member":"worker-a","ttl":"30s"}`, nil); status != http.StatusOK {
		t.Fatalf("join: HTTP %d %s", status, b)
	}
	testutil.Eventually(t, 10*time.Second, "the group's page shows worker-a owning all four partitions", func() (bool, string) {
		status, body := get(t, n, operatorTok, "/ui/group?name=shards")
		_, members, _ := strings.Cut(body, `id="members"`)
		_, parts, _ := strings.Cut(body, `id="partitions"`)
		return status == http.StatusOK && strings.Contains(members, "<td>0 1 2 3</td>") &&
			strings.Count(parts, "<td>worker-a</td>") == 4, body
	})
	status, list := get(t, n, operatorTok, "/ui/groups")
	_, row, _ := strings.Cut(list, `href="/ui/group?name=shards"`)
	row, _, _ = strings.Cut(row, "</tr>")
	// 4 partitions, 1 member, 0 unowned
	if status != http.StatusOK || !strings.Contains(row, `<td class="num">4</td><td class="num">1</td><td class="num">0</td>`) {
		t.Fatalf("the groups view: HTTP %d, the row of shards:\n%s", status, row)
	}
	if status, _ := get(t, n, workerTok, "/ui/groups"); status != http.StatusForbidden {
		t.Fatalf("a worker's token on the groups view: HTTP %d", status)
	}
}
