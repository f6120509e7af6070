// Package clock is the node's (and the Go client's) source of time. Tests
// replace it with a Fake that advances on command; fault tests skew or step
// one node's or one client's clock (Skewed), which libfaketime cannot do
// to a Go program.
package clock

import "time"

// Clock tells the time and runs functions later. Durations are measured on
// its monotonic reading.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop prevents the call if it has not happened; it reports whether it
	// did.
	Stop() bool
}

// Real is the system clock.
type Real struct{}

func (Real) Now() time.Time                            { return time.Now() }
func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
