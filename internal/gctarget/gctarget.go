// Package gctarget keeps the Go collector's headroom in proportion to a
// node's live heap. Go's default (GOGC=100) lets the heap grow to twice
// what is live before it collects: nothing for a small heap, but a node
// holding 100,000 leases then takes twice their memory. Run lowers GOGC as
// the live heap grows, so the headroom is max(Floor, Percent% of the live
// heap), never more than Go's default: a small heap (the usual node, and
// every lock workload) is collected exactly as before.
package gctarget

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Floor is the least headroom: below this much live heap, GOGC stays 100.
const Floor = 16 << 20

// Percent is the GOGC a large heap gets by default.
const Percent = 25

// GOGC is the percentage for a live heap of live bytes: Floor of headroom,
// or percent of the heap once that is more, and never above 100.
func GOGC(live uint64, percent int) int {
	if live <= Floor {
		return 100
	}
	return min(100, max(percent, int(100*Floor/live)))
}

// Run keeps GOGC at GOGC(live heap, percent), checked every interval,
// until ctx ends; then it puts back the GOGC it found.
func Run(ctx context.Context, percent int, interval time.Duration) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	set := debug.SetGCPercent(100)
	found := set
	defer func() { debug.SetGCPercent(found) }()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			if want := GOGC(sample[0].Value.Uint64(), percent); want != set {
				debug.SetGCPercent(want)
				set = want
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
