package main

import (
	"encoding/json"
	"os"
	"sync"
	"time"
)

// ownLog appends one JSON line per event of a worker's ownership of a
// shard: start (with the session's safe deadline), hold (a later safe
// deadline, logged when it moves), stop, and a write refused by the fence.
// Times are Unix nanoseconds of this machine's clock. Lines are single
// writes to an O_APPEND file, so they survive a SIGKILL whole.
type ownLog struct {
	mu     sync.Mutex
	f      *os.File // nil: no log
	member string
	last   map[[2]uint64]int64 // (shard, epoch) -> last deadline logged
}

// ownEvent is one line.
type ownEvent struct {
	Event     string `json:"event"` // start, hold, stop, refused
	Member    string `json:"member"`
	Partition int    `json:"partition"`
	Epoch     uint64 `json:"epoch"`
	At        int64  `json:"at"`
	Deadline  int64  `json:"deadline,omitempty"`
}

func openOwnLog(path, member string) (*ownLog, error) {
	l := &ownLog{member: member, last: map[[2]uint64]int64{}}
	if path == "" {
		return l, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	l.f = f
	return l, nil
}

func (l *ownLog) write(e ownEvent) {
	if l.f == nil {
		return
	}
	e.Member, e.At = l.member, time.Now().UnixNano()
	b, _ := json.Marshal(e)
	l.f.Write(append(b, '\n'))
}

func (l *ownLog) start(shard int, epoch uint64, deadline time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last[[2]uint64{uint64(shard), epoch}] = deadline.UnixNano()
	l.write(ownEvent{Event: "start", Partition: shard, Epoch: epoch, Deadline: deadline.UnixNano()})
}

// hold logs the session's safe deadline before a write, if it moved on.
func (l *ownLog) hold(shard int, epoch uint64, deadline time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := [2]uint64{uint64(shard), epoch}
	if d := deadline.UnixNano(); d > l.last[k] {
		l.last[k] = d
		l.write(ownEvent{Event: "hold", Partition: shard, Epoch: epoch, Deadline: d})
	}
}

func (l *ownLog) stop(shard int, epoch uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.last, [2]uint64{uint64(shard), epoch})
	l.write(ownEvent{Event: "stop", Partition: shard, Epoch: epoch})
}

func (l *ownLog) refused(shard int, epoch uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.write(ownEvent{Event: "refused", Partition: shard, Epoch: epoch})
}

func (l *ownLog) Close() error {
	if l.f == nil {
		return nil
	}
	return l.f.Close()
}
