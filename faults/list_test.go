package faults

import (
	"testing"
	"time"
)

// The list every lease service should prove, one test each (listed in
// docs/invariants.md under the invariant each proves), with real `serve`
// processes and client processes where the fault is a process's:
//
//	TestCrashBeforeAcquire, TestCrashAfterAcquire        crash_test.go
//	TestPauseLongerThanLease, TestResumeAfterLongStop    pause_test.go
//	TestDelayedReleaseAfterRegrant,
//	TestForcedReleaseWithActiveWorker                    release_test.go
//	TestConcurrentAcquisitions                           contend_test.go
//	TestStoreFailover, TestLockServiceRestart            restart_test.go
//	TestDownstreamWriteFromExpiredOwner                  downstream_test.go
//	TestClockSkewMonotonicOffset                         timens_test.go
//
// and the clock-rate and wall-step tests of the clock-skew item in
// cluster/skew_test.go (in-process: a rate cannot be given to a process).

// listTTL is the client processes' TTL in the list's tests: short, so a
// lease that must run out does so quickly.
const listTTL = time.Second

// startOne starts a single-node `serve` and waits until it is ready.
func startOne(t *testing.T, args ...string) *node {
	t.Helper()
	n := newNode(t, "n1", "", args...)
	if err := n.start(); err != nil {
		t.Fatal(err)
	}
	return n
}
