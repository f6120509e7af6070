package main_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestE2EObserveExitsCleanlyOnInterrupt: `leasehold elect NAME --observe`
// prints the current leader, and on SIGINT (Ctrl-C) exits 0 without an
// error message, as watch does.
func TestE2EObserveExitsCleanlyOnInterrupt(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	o := startProc(t, n.dir, "observe", childEnv(), "elect", "--endpoints", n.url, "E", "--observe", "--json")
	checkFor(t, 10*time.Second, func() error {
		if !strings.Contains(o.Stdout(), `"election":"E"`) {
			return fmt.Errorf("no leader line yet: %q (stderr %q)", o.Stdout(), o.Stderr())
		}
		return nil
	})
	o.Cmd.Process.Signal(syscall.SIGINT)
	if !o.Wait(exitTimeout) || o.Code() != 0 || o.Stderr() != "" {
		t.Fatalf("elect --observe after SIGINT: exited=%v code=%d stderr=%q", o.Exited(), o.Code(), o.Stderr())
	}
}
