package server_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// docs/transactions.md's transaction example runs as documented through the JSON
// handler: the first claim runs the then branch and writes both keys at
// one version; the same request again finds the owner and writes nothing.
// Each is counted by the branch it ran.
func TestReadmeTxnExample(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	hc := httpClient(t)
	body := docBody(t, "docs/transactions.md", "# claim job 7 and set its state in one step")
	status, out := postJSON(t, hc, n, leaseholdv1connect.KVTxnProcedure, body)
	if status != 200 || out["succeeded"] != true || fmt.Sprint(out["compares"]) != "[true]" {
		t.Fatalf("docs/transactions.md's Txn: status %d: %v, want the then branch", status, out)
	}
	index := jsonUint(t, out["index"], "index")
	results, _ := out["results"].([]any)
	if len(results) != 2 {
		t.Fatalf("docs/transactions.md's Txn: %v, want two results", out)
	}
	for i, key := range []string{"jobs/7/owner", "jobs/7/state"} {
		r := jsonObj(t, results[i], "results")
		if r["key"] != key || jsonUint(t, r["version"], "version") != index {
			t.Errorf("results[%d] = %v, want %s at version %d", i, r, key, index)
		}
	}
	status, out = postJSON(t, hc, n, leaseholdv1connect.KVTxnProcedure, body)
	if status != 200 || out["succeeded"] != nil || fmt.Sprint(out["compares"]) != "[false]" || out["results"] != nil {
		t.Fatalf("docs/transactions.md's Txn again: status %d: %v, want the (empty) else branch", status, out)
	}
	for branch, want := range map[string]float64{"then": 1, "else": 1} {
		if got := counterValue(t, n, "leasehold_kv_txns_total", map[string]string{"branch": branch}); got != want {
			t.Errorf("leasehold_kv_txns_total{branch=%q} = %v, want %v", branch, got, want)
		}
	}
	status, out = postJSON(t, hc, n, leaseholdv1connect.KVGetProcedure, `{"key":"jobs/7/state"}`)
	if status != 200 || out["value"] != "cnVubmluZw==" || jsonUint(t, out["version"], "version") != index {
		t.Fatalf("jobs/7/state after docs/transactions.md's Txn: %v, want running at %d", out, index)
	}
}

// docs/transactions.md's service registration runs as documented: a lease, a key
// bound to it that List shows with its lease, and the key gone with the
// lease.
func TestReadmeBoundKeyExample(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := newClient(t, n)
	hc := httpClient(t)
	status, out := postJSON(t, hc, n, leaseholdv1connect.LeasesAcquireProcedure, docBody(t, "docs/transactions.md", "# register: take a lease for this instance"))
	if status != 200 {
		t.Fatalf("docs/transactions.md's Acquire: status %d: %v", status, out)
	}
	id := jsonUint(t, jsonObj(t, out["lease"], "lease")["id"], "id")
	secret, _ := out["secret"].(string)
	body := docBody(t, "docs/transactions.md", "# bind your address to it")
	for placeholder, real := range map[string]string{"$id": strconv.FormatUint(id, 10), "$secret": secret} {
		if !strings.Contains(body, placeholder) {
			t.Fatalf("docs/transactions.md's bound Put %s no longer has %s", body, placeholder)
		}
		body = strings.ReplaceAll(body, placeholder, real)
	}
	if status, out := postJSON(t, hc, n, leaseholdv1connect.KVPutProcedure, body); status != 200 {
		t.Fatalf("docs/transactions.md's bound Put: status %d: %v", status, out)
	}
	list := docBody(t, "docs/transactions.md", "# who is alive: every key under the prefix")
	status, out = postJSON(t, hc, n, leaseholdv1connect.KVListProcedure, list)
	items, _ := out["items"].([]any)
	if status != 200 || len(items) != 1 {
		t.Fatalf("docs/transactions.md's List: status %d: %v, want one item", status, out)
	}
	it := jsonObj(t, items[0], "items[0]")
	if it["key"] != "alive/api/node-1" || it["value"] != "MTAuMC4wLjc6ODA4MA==" || jsonUint(t, it["leaseId"], "leaseId") != id {
		t.Fatalf("docs/transactions.md's List: %v, want the address bound to lease %d", it, id)
	}
	if err := release(c, id, secret); err != nil {
		t.Fatal(err)
	}
	status, out = postJSON(t, hc, n, leaseholdv1connect.KVListProcedure, list)
	if status != 200 || out["items"] != nil {
		t.Fatalf("docs/transactions.md's List after the lease ended: status %d: %v, want nobody", status, out)
	}
}
