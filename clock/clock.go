// Package clock is the node's source of time. Tests replace it with a Fake
// that advances on command; fault tests can skew or jump one node's clock,
// which libfaketime cannot do to a Go program.
package clock

import (
	"sync"
	"time"
)

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

// Skewed is a real clock whose reading is shifted by an offset and whose
// durations run at Rate times real speed (1 = normal). Both can change at
// run time, so a fault test can jump or skew a live node.
type Skewed struct {
	mu   sync.Mutex
	base time.Time // real time at the last change
	at   time.Time // skewed time at the last change
	rate float64
}

// NewSkewed returns a Skewed clock that starts equal to the real one.
func NewSkewed() *Skewed {
	now := time.Now()
	return &Skewed{base: now, at: now, rate: 1}
}

func (s *Skewed) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nowLocked(time.Now())
}

func (s *Skewed) nowLocked(real time.Time) time.Time {
	return s.at.Add(time.Duration(float64(real.Sub(s.base)) * s.rate))
}

// Jump moves the clock by d (forward or back).
func (s *Skewed) Jump(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	real := time.Now()
	s.at, s.base = s.nowLocked(real).Add(d), real
}

// SetRate makes the clock run at rate times real speed from now on.
func (s *Skewed) SetRate(rate float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	real := time.Now()
	s.at, s.base, s.rate = s.nowLocked(real), real, rate
}

// AfterFunc waits d of this clock's time, at the rate in force when called.
func (s *Skewed) AfterFunc(d time.Duration, f func()) Timer {
	s.mu.Lock()
	rate := s.rate
	s.mu.Unlock()
	if rate <= 0 {
		rate = 1e-9
	}
	return time.AfterFunc(time.Duration(float64(d)/rate), f)
}
