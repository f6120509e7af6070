package main_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A group member's session is named so the CLI can show and force it:
// `locks` prints its resource (grep finds it as text), and `status`,
// `locks show` and `force-release` take that resource as it prints,
// against a real serve process.
func TestCLINamesAGroupSession(t *testing.T) {
	n := startNode(t)
	n.lhOK("groups", "create", "shards", "--partitions", "2")
	var joined struct {
		Lease struct {
			ID        string   `json:"id"`
			Resources []string `json:"resources"`
		} `json:"lease"`
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Post(n.url+"/leasehold.v1.Groups/Join", "application/json",
		strings.NewReader(`{"group":"shards","member":"worker-1","ttl":"3600s"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := json.Unmarshal(body, &joined); err != nil || resp.StatusCode != http.StatusOK || len(joined.Lease.Resources) != 1 {
		t.Fatalf("join: HTTP %d %s (%v)", resp.StatusCode, body, err)
	}
	const name = "@leasehold/group/shards/worker-1"
	if joined.Lease.Resources[0] != name {
		t.Fatalf("the session's resource is %q, want %q", joined.Lease.Resources[0], name)
	}
	id := joined.Lease.ID

	locks := n.lhOK("locks")
	grep := exec.Command("grep", "shards")
	grep.Stdin = strings.NewReader(locks.stdout)
	out, err := grep.CombinedOutput()
	if err != nil || strings.Contains(string(out), "binary file") || !strings.Contains(string(out), name) {
		t.Fatalf("leasehold locks | grep shards: %q (%v); want the session's line\nlocks:\n%s", out, err, locks.stdout)
	}
	if bytes.ContainsFunc([]byte(locks.stdout), func(r rune) bool { return r < ' ' && r != '\n' && r != '\t' }) {
		t.Fatalf("locks prints a control character:\n%q", locks.stdout)
	}
	if st := n.status(name); st.Holder == nil || strconv.FormatUint(st.Holder.LeaseID, 10) != id {
		t.Fatalf("status %s: %+v; want lease %s", name, st, id)
	}
	if r := n.lhOK("locks", "show", name); !strings.Contains(r.stdout, "lease "+id) {
		t.Fatalf("locks show %s: want lease %s\n%s", name, id, r)
	}
	n.lhOK("force-release", name, "--lease", id, "--reason", "stuck member", "--yes")
	if st := n.status(name); st.Holder != nil {
		t.Fatalf("after force-release, %s is held by %+v", name, st.Holder)
	}
	if r := n.lhOK("groups", "show", "shards"); strings.Contains(r.stdout, "worker-1") {
		t.Fatalf("the forced member is still in the group:\n%s", r)
	}
}
