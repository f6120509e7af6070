package clock

import (
	"time"
	"unsafe"
)

// stepWall returns t with its wall reading moved by d and its monotonic
// reading kept, as time.Now() reads after the host's clock was stepped by
// d. The time package moves both readings together (Add), so this moves
// both and puts the monotonic one back: time.Time is {wall uint64; ext
// int64; loc *Location}, and ext holds the monotonic reading while the
// hasMonotonic bit (the top bit of wall) is set. TestStepWall fails if a
// Go release changes that.
func stepWall(t time.Time, d time.Duration) time.Time {
	u := t.Add(d)
	if d == 0 {
		return u
	}
	r := (*timeLayout)(unsafe.Pointer(&u))
	if r.wall&hasMonotonic == 0 {
		return u // no monotonic reading (or Add dropped it): only wall is left
	}
	r.ext -= int64(d)
	return u
}

const hasMonotonic = 1 << 63

type timeLayout struct {
	wall uint64
	ext  int64
	loc  *time.Location
}

// The layout must at least have time.Time's size.
var _ [unsafe.Sizeof(time.Time{}) - unsafe.Sizeof(timeLayout{})]struct{}
var _ [unsafe.Sizeof(timeLayout{}) - unsafe.Sizeof(time.Time{})]struct{}
