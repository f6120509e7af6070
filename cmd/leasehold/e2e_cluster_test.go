package main_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
	"github.com/leasehold/leasehold/internal/procs"
)

// TestClusterMembershipCommands: cluster transfer-leader, remove and add
// against a real cluster of three, each with its -o json structure.
func TestClusterMembershipCommands(t *testing.T) {
	t.Parallel()
	nodes := procs.StartServeCluster(t, lhBin, t.TempDir())
	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.URL)
	}
	env := childEnv("LEASEHOLD_ENDPOINTS=" + strings.Join(urls, ","))
	lhJSON := func(v any, args ...string) {
		t.Helper()
		r := lhEnv(t, env, append(args, "-o", "json")...)
		if r.code != 0 {
			t.Fatalf("leasehold %s: %s", strings.Join(args, " "), r)
		}
		if err := decodeStrict(r.stdout, v); err != nil {
			t.Fatalf("leasehold %s -o json: %v\n%s", strings.Join(args, " "), err, r.stdout)
		}
	}
	members := func() map[string]cliout.Member {
		var ms cliout.Members
		lhJSON(&ms, "cluster", "members")
		byID := map[string]cliout.Member{}
		for _, m := range ms.Members {
			byID[m.NodeID] = m
		}
		return byID
	}
	leader := func(want string) {
		t.Helper()
		checkFor(t, 20*time.Second, func() error {
			for id, m := range members() {
				if m.Leader && (want == "" || id == want) {
					return nil
				}
			}
			return fmt.Errorf("%s does not lead yet", want)
		})
	}
	leader("")

	var moved cliout.LeaderTransferred
	lhJSON(&moved, "cluster", "transfer-leader")
	if !moved.Transferred || moved.NodeID != "" {
		t.Errorf("transfer-leader: %+v; want transferred, to no node named", moved)
	}
	lhJSON(&moved, "cluster", "transfer-leader", "n1")
	if !moved.Transferred || moved.NodeID != "n1" {
		t.Errorf("transfer-leader n1: %+v", moved)
	}
	leader("n1")

	n3 := members()["n3"]
	var removed cliout.MemberRemoved
	lhJSON(&removed, "cluster", "remove", "n3")
	if _, still := members()["n3"]; removed.NodeID != "n3" || still {
		t.Errorf("remove n3: %+v; n3 still a member: %v", removed, still)
	}
	var added cliout.MemberAdded
	lhJSON(&added, "cluster", "add", "n3", n3.RaftAddr)
	if m, ok := members()["n3"]; added != (cliout.MemberAdded{NodeID: "n3", RaftAddr: n3.RaftAddr}) || !ok || !m.Voter {
		t.Errorf("add n3 %s: %+v; n3 a voter again: %v", n3.RaftAddr, added, m.Voter)
	}
}
