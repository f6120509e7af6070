package main

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// Fault points for the tests, off unless the test sets their environment
// variable to a file path: the first message to reach the point writes
// that file (its order, n and token) and holds there, so the test knows
// exactly where the consumer is before it sends SIGSTOP, instead of
// guessing with a sleep.
const (
	// envStopInTx: inside the event's transaction, before the fence check.
	envStopInTx = "ORDERS_FAULT_STOP_IN_TX"
	// envStopAfterCommit: after the event committed, before the ack.
	envStopAfterCommit = "ORDERS_FAULT_STOP_AFTER_COMMIT"
)

// faultHold is how long the marked message waits for the test's signal.
const faultHold = 2 * time.Second

var fired sync.Map // env -> struct{}: each point fires once per process

func faultPoint(env string, m *queue.Message) {
	path := os.Getenv(env)
	if path == "" {
		return
	}
	if _, done := fired.LoadOrStore(env, struct{}{}); done {
		return
	}
	body := fmt.Sprintf("%s %d %d\n", m.Key, m.Sequence, m.Token)
	if err := os.WriteFile(path+".tmp", []byte(body), 0o644); err != nil {
		panic("fault point " + env + ": " + err.Error())
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		panic("fault point " + env + ": " + err.Error())
	}
	time.Sleep(faultHold)
}
