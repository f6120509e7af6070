package clock

import (
	"sync"
	"time"
)

// Skewed is a real clock whose monotonic reading runs at Rate times real
// speed (1 = normal) and can jump, and whose wall reading can also be
// stepped alone, as a host's is. All of it can change at run time, so a
// fault test can skew or step a live node or client.
type Skewed struct {
	mu   sync.Mutex
	base time.Time     // real time at the last change
	at   time.Time     // this clock's reading at base, without the wall step
	rate float64       // > 0
	wall time.Duration // the wall reading's step, on top of at
}

// NewSkewed returns a Skewed clock that starts equal to the real one.
func NewSkewed() *Skewed {
	now := time.Now()
	return &Skewed{base: now, at: now, rate: 1}
}

func (s *Skewed) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return stepWall(s.nowLocked(time.Now()), s.wall)
}

func (s *Skewed) nowLocked(real time.Time) time.Time {
	return s.at.Add(time.Duration(float64(real.Sub(s.base)) * s.rate))
}

// Jump moves the whole clock by d (forward or back): its wall reading and
// its monotonic one, which a host's clock step never moves (see JumpWall).
func (s *Skewed) Jump(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	real := time.Now()
	s.at, s.base = s.nowLocked(real).Add(d), real
}

// JumpWall steps the wall reading by d and leaves the monotonic one alone:
// what `date -s` or an NTP step does to every process of a host. Durations
// measured between readings and timers do not see it.
func (s *Skewed) JumpWall(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wall += d
}

// SetRate makes the clock run at rate (> 0) times real speed from now on.
func (s *Skewed) SetRate(rate float64) {
	if rate <= 0 {
		panic("clock: a Skewed clock's rate must be positive")
	}
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
	return time.AfterFunc(time.Duration(float64(d)/rate), f)
}

// RealAt is the real time (time.Now's) at which this clock reads t, a
// reading of it, if the rate stays as it is: how a test puts instants of
// clocks that run at different rates on one time line.
func (s *Skewed) RealAt(t time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	real := time.Now()
	return real.Add(time.Duration(float64(t.Sub(stepWall(s.nowLocked(real), s.wall))) / s.rate))
}
