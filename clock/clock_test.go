package clock

import (
	"testing"
	"time"
)

func TestFakeRunsDueTimersInOrder(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	var got []int
	f.AfterFunc(3*time.Second, func() { got = append(got, 3) })
	f.AfterFunc(time.Second, func() { got = append(got, 1) })
	stopped := f.AfterFunc(2*time.Second, func() { got = append(got, 2) })
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop should report true once, then false")
	}
	f.Advance(1500 * time.Millisecond)
	if len(got) != 1 || got[0] != 1 {
		t.Fatalf("after 1.5s ran %v, want [1]", got)
	}
	f.Advance(2 * time.Second)
	if len(got) != 2 || got[1] != 3 || f.Pending() != 0 {
		t.Fatalf("after 3.5s ran %v with %d pending, want [1 3] and none", got, f.Pending())
	}
	if want := time.Unix(0, 0).Add(3500 * time.Millisecond); !f.Now().Equal(want) {
		t.Fatalf("now %v, want %v", f.Now(), want)
	}
}

func TestSkewedJumpAndRate(t *testing.T) {
	s := NewSkewed()
	before := s.Now()
	s.Jump(time.Hour)
	if d := s.Now().Sub(before); d < time.Hour || d > time.Hour+time.Second {
		t.Fatalf("after a 1h jump the clock moved %v", d)
	}
	s.SetRate(10)
	a := s.Now()
	time.Sleep(20 * time.Millisecond)
	if d := s.Now().Sub(a); d < 150*time.Millisecond {
		t.Fatalf("at 10x, 20ms of real time moved the clock only %v", d)
	}
	fired := make(chan struct{})
	start := time.Now()
	s.AfterFunc(time.Second, func() { close(fired) }) // 100ms of real time at 10x
	select {
	case <-fired:
		if el := time.Since(start); el > 900*time.Millisecond {
			t.Fatalf("a 1s timer at 10x took %v of real time", el)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("timer never fired")
	}
}

// stepWall moves a reading's wall clock and nothing else: durations
// between readings (the monotonic clock) do not see the step.
func TestStepWall(t *testing.T) {
	now := time.Now()
	for _, d := range []time.Duration{time.Hour, -time.Hour, 90 * time.Second} {
		u := stepWall(now, d)
		if got := u.Sub(now); got != 0 {
			t.Errorf("step %v: the monotonic reading moved %v", d, got)
		}
		if got := u.Round(0).Sub(now.Round(0)); got != d {
			t.Errorf("step %v: the wall reading moved %v", d, got)
		}
		if !u.Equal(now) || u.After(now) || u.Before(now) {
			t.Errorf("step %v: comparisons should use the monotonic reading", d)
		}
	}
	if wall := now.Round(0); !stepWall(wall, time.Hour).Equal(wall.Add(time.Hour)) {
		t.Error("a reading without a monotonic clock should just move")
	}
}

// A wall step moves what the clock says, not how long things take: a
// timer or a duration measured across the step is unchanged.
func TestSkewedJumpWall(t *testing.T) {
	s := NewSkewed()
	before := s.Now()
	s.JumpWall(time.Hour)
	after := s.Now()
	if d := after.Sub(before); d < 0 || d > time.Second {
		t.Fatalf("a measured duration across a +1h wall step is %v", d)
	}
	if d := after.Unix() - before.Unix(); d < 3599 || d > 3601 {
		t.Fatalf("the wall reading moved %ds, want 3600", d)
	}
	if d := time.Until(s.RealAt(after.Add(time.Second))); d < 900*time.Millisecond || d > time.Second {
		t.Fatalf("1s ahead of the stepped clock is %v of real time away", d)
	}
}

// RealAt puts a skewed clock's instants on the real time line.
func TestSkewedRealAt(t *testing.T) {
	s := NewSkewed()
	s.SetRate(0.5)
	at := s.RealAt(s.Now().Add(time.Second)) // 1s at half speed: 2s of real time
	if d := time.Until(at); d < 1900*time.Millisecond || d > 2*time.Second {
		t.Fatalf("1s of a half-speed clock is %v of real time", d)
	}
	s.SetRate(2)
	if d := time.Until(s.RealAt(s.Now().Add(time.Second))); d < 400*time.Millisecond || d > 500*time.Millisecond {
		t.Fatalf("1s of a double-speed clock is %v of real time", d)
	}
}
