package main

import (
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// envStallMark is the test's fault point, off unless set to a file path:
// once the test creates that path + ".arm", the worker, just before its
// next write, writes the path (with the shard's number) and then holds the
// write until the test creates path + ".release" (at most stallHold), so
// the test can SIGSTOP it there: a fixed hold could run out before the stop
// lands on a loaded machine, and the write would go through unfenced.
// Resumed after its session lapsed, it then tries the write with its old
// epoch: only the fence stops it. It stalls once.
const envStallMark = "SHARDS_FAULT_STALL_MARK"

const stallHold = 2 * time.Minute

var (
	stalled     sync.Once
	stalledDone atomic.Bool
)

func stallOnce(shard int) {
	path := os.Getenv(envStallMark)
	if path == "" || stalledDone.Load() {
		return
	}
	if _, err := os.Stat(path + ".arm"); err != nil {
		return
	}
	stalled.Do(func() {
		defer stalledDone.Store(true)
		if err := os.WriteFile(path, []byte(strconv.Itoa(shard)), 0o644); err != nil {
			panic("fault point: " + err.Error())
		}
		for deadline := time.Now().Add(stallHold); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(path + ".release"); err == nil {
				return
			}
		}
	})
}
