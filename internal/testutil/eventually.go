package testutil

import (
	"testing"
	"time"
)

// Condition is what Eventually polls: a plain yes or no; a yes or no with
// the reason it does not hold yet (printed if the wait fails); a yes or no
// that can fail at once with an error; or a check that holds when it
// returns nil, its error being the reason it does not yet.
type Condition interface {
	func() bool | func() (bool, string) | func() (bool, error) | func() error
}

// pollEvery is short enough not to slow tests down and long enough not to
// load a busy machine.
const pollEvery = 10 * time.Millisecond

// Eventually polls cond until it holds; if d passes first it fails the
// test with what (and cond's last reason). A condition that returns an
// error fails the test at once.
func Eventually[C Condition](t testing.TB, d time.Duration, what string, cond C) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, why := check(t, what, cond)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if why != "" {
				t.Fatalf("not within %v: %s: %s", d, what, why)
			}
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(pollEvery)
	}
}

func check[C Condition](t testing.TB, what string, cond C) (bool, string) {
	t.Helper()
	switch f := any(cond).(type) {
	case func() bool:
		return f(), ""
	case func() (bool, string):
		return f()
	case func() (bool, error):
		ok, err := f()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		return ok, ""
	case func() error:
		if err := f(); err != nil {
			return false, err.Error()
		}
		return true, ""
	}
	panic("testutil: unreachable condition type")
}
