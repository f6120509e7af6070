package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"time"
)

// interval is one member's hold of a partition under one epoch, by its
// own client's account: from the function's start to its stop, cut at the
// last safe deadline it logged (a member paused or killed may log its stop
// late or never; it may not act past its deadline, and the fence refuses
// it if it tries).
type interval struct {
	member     string
	partition  int
	epoch      uint64
	start, end int64 // Unix ns
}

// ownership is what the workers' logs say.
type ownership struct {
	intervals []interval
	refused   []ownEvent
}

// readOwnership reads the workers' logs (one file each).
func readOwnership(paths ...string) (ownership, error) {
	var o ownership
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return o, err
		}
		open := map[[2]uint64]*interval{}
		deadline := map[[2]uint64]int64{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var e ownEvent
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				continue // a line cut by SIGKILL
			}
			k := [2]uint64{uint64(e.Partition), e.Epoch}
			switch e.Event {
			case "start":
				open[k] = &interval{member: e.Member, partition: e.Partition, epoch: e.Epoch, start: e.At}
				deadline[k] = e.Deadline
			case "hold":
				deadline[k] = max(deadline[k], e.Deadline)
			case "stop":
				if iv := open[k]; iv != nil {
					iv.end = min(e.At, deadline[k])
					o.intervals = append(o.intervals, *iv)
					delete(open, k)
				}
			case "refused":
				o.refused = append(o.refused, e)
			}
		}
		f.Close()
		for k, iv := range open {
			iv.end = deadline[k] // never stopped: killed, or still paused
			o.intervals = append(o.intervals, *iv)
		}
	}
	slices.SortFunc(o.intervals, func(a, b interval) int {
		if a.partition != b.partition {
			return a.partition - b.partition
		}
		return int(a.start - b.start)
	})
	return o, nil
}

// overlaps lists every pair of intervals of one partition held by two
// members at once.
func (o ownership) overlaps() []string {
	var out []string
	for i, a := range o.intervals {
		for _, b := range o.intervals[i+1:] {
			if b.partition != a.partition {
				break
			}
			if b.start < a.end && a.member != b.member {
				out = append(out, fmt.Sprintf("partition %d: %s (epoch %d) held it until %s, %s (epoch %d) from %s",
					a.partition, a.member, a.epoch, stampNS(a.end), b.member, b.epoch, stampNS(b.start)))
			}
		}
	}
	return out
}

// heldAt lists the partitions member held at t.
func (o ownership) heldAt(member string, t time.Time) []int {
	var out []int
	for _, iv := range o.intervals {
		if iv.member == member && iv.start <= t.UnixNano() && t.UnixNano() < iv.end {
			out = append(out, iv.partition)
		}
	}
	return out
}

// takenOver is when another member than member first started partition
// after t (false: never).
func (o ownership) takenOver(partition int, member string, t time.Time) (time.Time, bool) {
	for _, iv := range o.intervals {
		if iv.partition == partition && iv.member != member && iv.start >= t.UnixNano() {
			return time.Unix(0, iv.start), true
		}
	}
	return time.Time{}, false
}

func stampNS(ns int64) string { return time.Unix(0, ns).UTC().Format("15:04:05.000000") }
