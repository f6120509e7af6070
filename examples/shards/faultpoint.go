package main

import (
	"os"
	"strconv"
	"sync"
	"time"
)

// envStallMark is the test's fault point, off unless set to a file path:
// once, just before a write, the worker writes that file (with the shard's
// number) and then holds the write for stallHold, so the test can SIGSTOP
// it there. Resumed after its session lapsed, it then tries the write
// with its old epoch: only the fence stops it.
const envStallMark = "SHARDS_FAULT_STALL_MARK"

const stallHold = 2 * time.Second

var stalled sync.Once

func stallOnce(shard int) {
	path := os.Getenv(envStallMark)
	if path == "" {
		return
	}
	stalled.Do(func() {
		if err := os.WriteFile(path, []byte(strconv.Itoa(shard)), 0o644); err != nil {
			panic("fault point: " + err.Error())
		}
		time.Sleep(stallHold)
	})
}
