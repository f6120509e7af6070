package server

import (
	"strings"
	"testing"
	"time"
)

// The bucket holds twice the rate; a request takes at most what it holds,
// so no request leaves its client in debt, and one larger than the burst
// is refused without taking anything.
func TestRateLimiterNeverInDebt(t *testing.T) {
	r := newRateLimiter(5) // burst 10, one acquisition back every 200ms
	t0 := time.Unix(1_000_000, 0)
	if err := r.allow("c", 11, t0); err == nil || !strings.Contains(err.Error(), "split it") {
		t.Fatalf("11 acquisitions with a burst of 10: %v, want a refusal that says to split", err)
	}
	if err := r.allow("c", 10, t0); err != nil {
		t.Fatalf("the refused request took from the bucket: %v", err)
	}
	if err := r.allow("c", 1, t0.Add(100*time.Millisecond)); err == nil || !strings.Contains(err.Error(), "acquire_rate") {
		t.Fatalf("an empty bucket let an acquisition through: %v", err)
	}
	// Empty, not in debt: one acquisition is back after 1/rate.
	if err := r.allow("c", 1, t0.Add(200*time.Millisecond)); err != nil {
		t.Fatalf("after 1/rate: %v", err)
	}
	// Full again after burst/rate; other clients were never affected.
	if err := r.allow("c", 10, t0.Add(2200*time.Millisecond)); err != nil {
		t.Fatalf("after burst/rate: %v", err)
	}
	if err := r.allow("other", 10, t0.Add(2200*time.Millisecond)); err != nil {
		t.Fatalf("another client: %v", err)
	}
}

// A full bucket is dropped at the next sweep; a client still paying is kept.
func TestRateLimiterSweepsFullBuckets(t *testing.T) {
	r := newRateLimiter(0.01) // burst 1, refilled after 100s
	t0 := time.Unix(1_000_000, 0)
	for _, k := range []string{"a", "b"} {
		if err := r.allow(k, 1, t0); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.allow("a", 1, t0.Add(90*time.Second)); err == nil {
		t.Fatal("a sweep after a minute forgot a client whose bucket was still empty")
	}
	if err := r.allow("b", 1, t0.Add(200*time.Second)); err != nil {
		t.Fatalf("a refilled bucket: %v", err)
	}
	if _, ok := r.clients["a"]; ok {
		t.Fatalf("a full bucket was kept past a sweep: %d clients", len(r.clients))
	}
}
