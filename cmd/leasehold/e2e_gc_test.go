package main_test

import (
	"strings"
	"testing"
)

// TestE2EServeRefusesAGCPercentOutOfBounds: --gc-percent outside 10..100
// is refused as a usage error naming the bounds.
func TestE2EServeRefusesAGCPercentOutOfBounds(t *testing.T) {
	n := newNode(t)
	r := lhEnv(t, childEnv(), "serve", "--data-dir", n.dataDir, "--api-addr", n.apiAddr, "--raft-addr", n.raftAddr,
		"--gc-percent", "5")
	if r.code != 2 || !strings.Contains(r.stderr, "--gc-percent 5: give 10 to 100") {
		t.Fatalf("serve --gc-percent 5: %s", r)
	}
}
