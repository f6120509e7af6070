package ui_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine outlives the tests: an
// in-process API call (a watch stream above all) must end with its page.
// Raft's NetworkTransport leaves the reader of a peer's connection that
// its Close does not close (the 3-node test's); it is not ours.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/hashicorp/raft.(*NetworkTransport).handleConn"))
}
