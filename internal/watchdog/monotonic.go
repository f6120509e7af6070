package watchdog

import (
	"time"

	"golang.org/x/sys/unix"
)

// monoNow is CLOCK_MONOTONIC in nanoseconds: one clock for every process
// of the machine (Go's own monotonic readings come from it too).
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
}

// toMono converts a local deadline into CLOCK_MONOTONIC nanoseconds. The
// clock is read before the time remaining, so a stall between the two makes
// the result earlier, never later.
func toMono(deadline time.Time) int64 {
	now := monoNow()
	return now + int64(time.Until(deadline))
}

// fromMono converts CLOCK_MONOTONIC nanoseconds into a local time. time.Now
// is read before the clock, so a stall between the two makes the result
// earlier, never later.
func fromMono(mono int64) time.Time {
	now := time.Now()
	return now.Add(time.Duration(mono - monoNow()))
}
