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
