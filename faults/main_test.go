package faults

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	dir, err := os.MkdirTemp("", "leasehold-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		return 2
	}
	defer os.RemoveAll(dir)
	lhBin = filepath.Join(dir, "leasehold")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	args := []string{"build", "-o", lhBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "github.com/leasehold/leasehold/cmd/leasehold")
	if out, err := exec.CommandContext(ctx, goTool(), args...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "faults: go %s: %v\n%s", strings.Join(args, " "), err, out)
		return 2
	}
	code := m.Run()
	printReport(os.Stdout) // go test shows it with -v, or when the suite fails
	return code
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}
