package groups_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine outlives the tests: Run must
// leave nothing behind (partition functions, acknowledgements, the
// deadline watcher, the assignment stream) once it returned.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/leasehold/leasehold/client.(*Client).giveBackWith.func1"))
}
