package server_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests. Every test
// closes its HTTP clients' idle connections and stops its node (t.Cleanup),
// so nothing should be left: no goroutine is ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
