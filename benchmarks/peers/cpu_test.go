package main

import (
	"os"
	"testing"
	"time"
)

// TestProcCPUMatchesGetrusage: the CPU read from /proc/PID/stat (how the
// nodes' CPU is counted) agrees with getrusage (how the client's is) for
// this process, within the clock tick of /proc.
func TestProcCPUMatchesGetrusage(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here")
	}
	for start := time.Now(); time.Since(start) < 200*time.Millisecond; {
		// Burn CPU, so there is some to count.
	}
	self, proc := selfCPU(), procCPU(os.Getpid())
	if proc <= 0 || self <= 0 {
		t.Fatalf("CPU read as %v from /proc and %v from getrusage, want both above 0", proc, self)
	}
	if d := self - proc; d < 0 || d > 5*clockTick {
		t.Errorf("/proc says %v, getrusage %v (read after it): want at most %v apart", proc, self, 5*clockTick)
	}
}
