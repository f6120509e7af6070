package main_test

import (
	"testing"

	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
)

// health --json prints one object when the node is not ready too (ready
// false, why), and still exits 7, so a probe can log the reason.
func TestHealthJSONNotReady(t *testing.T) {
	t.Parallel()
	r := lhEnv(t, childEnv(), "health", "--endpoints", "http://"+freeAddr(t), "--timeout", "5s", "--json")
	var h cliout.Health
	if r.code != 7 || decodeStrict(r.stdout, &h) != nil || h.Ready || h.Message == "" || h.Endpoint == "" {
		t.Errorf("health --json with nobody listening: want exit 7 and {ready: false, message}\n%s", r)
	}
}
