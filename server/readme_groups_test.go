package server_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// docs/groups.md's partition group examples run as documented, through the
// real JSON handlers: create, join (all 8 partitions), and, once a second
// member's arrival revoked partition 7, its acknowledgement.
func TestReadmeGroupsExample(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	hc := httpClient(t)
	status, out := postJSON(t, hc, n, leaseholdv1connect.GroupsCreateProcedure, docBody(t, "docs/groups.md", "# a group of 8 partitions"))
	if status != 200 || out["group"].(map[string]any)["partitions"] != float64(8) {
		t.Fatalf("docs/groups.md's Create: status %d: %v", status, out)
	}
	status, out = postJSON(t, hc, n, leaseholdv1connect.GroupsJoinProcedure, docBody(t, "docs/groups.md", "# join as worker-1"))
	if status != 200 || len(out["partitions"].([]any)) != 8 || out["secret"] == "" {
		t.Fatalf("docs/groups.md's Join: status %d: %v", status, out)
	}
	lease, secret := out["lease"].(map[string]any)["id"].(string), out["secret"].(string)
	c := leaseholdv1connect.NewGroupsClient(hc, n.URL)
	if _, err := c.Join(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsJoinRequest{Group: "orders", Member: "worker-2",
		Ttl: dur(15 * time.Second)})); err != nil {
		t.Fatal(err)
	}
	_, got := groupOwners(t, c, "orders")
	p7 := got.Partitions[7]
	if !p7.Revoking || p7.Owner != "worker-1" {
		t.Fatalf("partition 7 after worker-2 joined: %v", p7)
	}
	body := docBody(t, "docs/groups.md", "# give a revoked partition up")
	for placeholder, real := range map[string]string{"$lease": lease, "$secret": secret,
		"$epoch": strconv.FormatUint(p7.Epoch, 10)} {
		if !strings.Contains(body, placeholder) {
			t.Fatalf("docs/groups.md's AckRevocation body %s no longer has %s", body, placeholder)
		}
		body = strings.ReplaceAll(body, placeholder, real)
	}
	if status, out := postJSON(t, hc, n, leaseholdv1connect.GroupsAckRevocationProcedure, body); status != 200 {
		t.Fatalf("docs/groups.md's AckRevocation: status %d: %v", status, out)
	}
	if _, got := groupOwners(t, c, "orders"); got.Partitions[7].Owner != "worker-2" {
		t.Fatalf("partition 7 after the acknowledgement: %v", got.Partitions[7])
	}
	if status, out := postJSON(t, hc, n, leaseholdv1connect.GroupsGetProcedure, docBody(t, "docs/groups.md", "# owners, epochs and since when")); status != 200 {
		t.Fatalf("docs/groups.md's Get: status %d: %v", status, out)
	}
}
