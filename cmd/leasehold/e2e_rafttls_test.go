package main_test

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/leasehold/leasehold/internal/procs"
)

// TestRaftTLSByServerName: nodes whose raft certificates name no address,
// only the name given as --raft-tls-server-name (as in Kubernetes, where
// nodes reach each other at pod IPs), form a cluster over mutual TLS, and
// a follower forwards writes to its leader, whom it dials at the IP the
// leader advertises. The certificates are deploy/kubernetes/make-certs.sh's.
func TestRaftTLSByServerName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tls := filepath.Join(dir, "tls")
	if out, err := exec.Command("sh", "../../deploy/kubernetes/make-certs.sh", "test", tls).CombinedOutput(); err != nil {
		t.Fatalf("make-certs.sh: %v\n%s", err, out)
	}
	nodes := procs.StartServeCluster(t, lhBin, dir, "--raft-tls-cert", filepath.Join(tls, "raft.crt"),
		"--raft-tls-key", filepath.Join(tls, "raft.key"), "--raft-tls-ca", filepath.Join(tls, "ca.crt"), "--raft-tls-server-name", "leasehold-raft")
	// Through every node: a follower's acquire is forwarded to the leader.
	for _, n := range nodes {
		r := lhEnv(t, childEnv(), "acquire", "--endpoints", n.URL, "tls/"+n.ID, "--ttl", "30s")
		if r.code != 0 {
			t.Errorf("acquire through %s: %s", n.ID, r)
		}
	}
}
