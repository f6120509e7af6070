package main

import (
	"os"
	"time"
)

// Fault points for the tests, off unless the test sets their environment
// variable to a file path: the worker writes that file when it reaches the
// point, so the test knows exactly where the process is before it sends
// SIGSTOP or SIGKILL, instead of guessing with a sleep.
const (
	// envMarkInTx: inside the payment transaction, before the fence check
	// and the writes; the worker then waits a little for the test's SIGSTOP.
	envMarkInTx = "PAYMENTS_FAULT_MARK_IN_TX"
	// envMarkAfterCommit: after the payment committed, before the result
	// is stored; the worker then blocks until the test's SIGKILL.
	envMarkAfterCommit = "PAYMENTS_FAULT_MARK_AFTER_COMMIT"
)

// faultPoint writes the marker named by env (if set) and then holds the
// request for hold, giving the test time to signal this process.
func faultPoint(env string, hold time.Duration) {
	path := os.Getenv(env)
	if path == "" {
		return
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		panic("fault point " + env + ": " + err.Error())
	}
	time.Sleep(hold)
}
