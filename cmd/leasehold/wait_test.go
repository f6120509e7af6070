package main

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// TestInLineWaitsPastTheLongestWaitOfANode: a node keeps a waiter an hour
// at most, so a longer --wait (or forever) queues again after each hour,
// each call bounded by its wait plus --timeout, until granted, the wait is
// spent, or the command is interrupted.
func TestInLineWaitsPastTheLongestWaitOfANode(t *testing.T) {
	const h = time.Hour
	g := &globals{timeout: 10 * time.Second}
	for _, tc := range []struct {
		name     string
		w        waitFlag
		timeouts int // calls that end with the wait run out, before a grant
		want     []time.Duration
		granted  bool
	}{
		{"forever: again after each hour, until granted", waitFlag{forever: true}, 3, []time.Duration{h, h, h, h}, true},
		{"2h30m: an hour, an hour, half an hour", waitFlag{d: 150 * time.Minute}, 5, []time.Duration{h, h, 30 * time.Minute}, false},
		{"1m: once", waitFlag{d: time.Minute}, 5, []time.Duration{time.Minute}, false},
		{"0: once, without waiting", waitFlag{}, 5, []time.Duration{0}, false},
		{"granted in the first hour", waitFlag{d: 3 * h}, 0, []time.Duration{h}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var waits []time.Duration
			got, err := inLine(context.Background(), g, tc.w, func(ctx context.Context, wait time.Duration) (string, error) {
				if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > wait+g.timeout {
					t.Errorf("a call waiting %v has the deadline %v (set: %v); want at most its wait plus --timeout", wait, time.Until(dl), ok)
				}
				waits = append(waits, wait)
				if len(waits) <= tc.timeouts {
					return "", leasehold.ErrWaitTimeout
				}
				return "lease", nil
			})
			if !slices.Equal(waits, tc.want) {
				t.Errorf("waits %v, want %v", waits, tc.want)
			}
			if tc.granted != (err == nil && got == "lease") || !tc.granted && !errors.Is(err, leasehold.ErrWaitTimeout) {
				t.Errorf("got %q, %v; want granted %v, else the wait timeout", got, err, tc.granted)
			}
		})
	}
	t.Run("forever ends when interrupted", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		_, err := inLine(ctx, g, waitFlag{forever: true}, func(context.Context, time.Duration) (string, error) {
			if calls++; calls == 2 {
				cancel()
			}
			return "", leasehold.ErrWaitTimeout
		})
		if calls != 2 || !errors.Is(err, leasehold.ErrWaitTimeout) {
			t.Errorf("after an interrupt: %d calls, %v; want 2 and the wait timeout", calls, err)
		}
	})
}

// TestWaitFlag: --wait takes a duration or forever, nothing else.
func TestWaitFlag(t *testing.T) {
	for in, want := range map[string]waitFlag{"forever": {forever: true}, "0": {}, "90s": {d: 90 * time.Second}, "2d": {d: 48 * time.Hour}} {
		var w waitFlag
		if err := w.Set(in); err != nil || w != want {
			t.Errorf("--wait %s: %+v, %v; want %+v", in, w, err, want)
		}
	}
	for _, in := range []string{"never", "-1s", "forever and a day"} {
		var w waitFlag
		if err := w.Set(in); err == nil {
			t.Errorf("--wait %s: accepted as %+v", in, w)
		}
	}
}
