package faults

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/leasehold/leasehold/internal/procs"
)

// lhBin is the leasehold binary built by TestMain.
var lhBin string

// full is the long mode (LEASEHOLD_FAULTS=full, as scripts/faults sets):
// more rounds and longer load in every scenario.
var full = os.Getenv("LEASEHOLD_FAULTS") == "full"

// rounds picks the short or the full figure.
func rounds(short, long int) int {
	if full {
		return long
	}
	return short
}

func TestMain(m *testing.M) {
	if os.Getenv(clientModeEnv) != "" {
		os.Exit(clientMain()) // this binary re-executed as a client process
	}
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	flag.Parse()
	bin, remove, err := procs.Build("leasehold-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		return 2
	}
	defer remove()
	lhBin = bin
	code := m.Run()
	printReport(os.Stdout) // go test shows it with -v, or when the suite fails
	return code
}
