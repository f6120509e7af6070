package testutil

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records the message and ends the
// goroutine, as the real one does.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fatal runs f against a recorder in its own goroutine and returns what it
// failed with ("" if it did not).
func fatal(t *testing.T, f func(tb testing.TB)) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the helper did not return within 10s")
	}
	return r.msg
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	msg := fatal(t, func(tb testing.TB) {
		Eventually(tb, 5*time.Second, "three polls", func() bool { n++; return n == 3 })
	})
	if msg != "" || n != 3 {
		t.Fatalf("failed with %q after %d polls, want success after 3", msg, n)
	}
}

func TestEventuallyFailsAtTheDeadlineWithTheLastReason(t *testing.T) {
	start := time.Now()
	msg := fatal(t, func(tb testing.TB) {
		Eventually(tb, 50*time.Millisecond, "never", func() (bool, string) { return false, "still no" })
	})
	if !strings.Contains(msg, "never: still no") {
		t.Fatalf("failed with %q, want the condition's name and last reason", msg)
	}
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Fatalf("gave up after %v, before its 50ms", took)
	}
}

func TestEventuallyFailsAtOnceOnAnError(t *testing.T) {
	polls := 0
	msg := fatal(t, func(tb testing.TB) {
		Eventually(tb, 5*time.Second, "a broken probe", func() (bool, error) { polls++; return false, errors.New("boom") })
	})
	if !strings.Contains(msg, "boom") || polls != 1 {
		t.Fatalf("failed with %q after %d polls, want boom after 1", msg, polls)
	}
}

func TestEventuallyRetriesACheckUntilItReturnsNil(t *testing.T) {
	polls := 0
	msg := fatal(t, func(tb testing.TB) {
		Eventually(tb, 5*time.Second, "a check", func() error {
			if polls++; polls < 3 {
				return errors.New("not yet")
			}
			return nil
		})
	})
	if msg != "" || polls != 3 {
		t.Fatalf("failed with %q after %d polls, want success after 3", msg, polls)
	}
	msg = fatal(t, func(tb testing.TB) {
		Eventually(tb, 50*time.Millisecond, "a check", func() error { return errors.New("still broken") })
	})
	if !strings.Contains(msg, "a check: still broken") {
		t.Fatalf("failed with %q, want the check's last error", msg)
	}
}

func TestContextEndsAfterItsTimeout(t *testing.T) {
	ctx := Context(t, 20*time.Millisecond)
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the context did not end within 10s of its 20ms")
	}
}
