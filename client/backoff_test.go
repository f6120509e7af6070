package client_test

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
)

// TestRetryBackoffIsFullJitter: the n-th pause of a retry loop is spread
// over [0, min(cap, base·2^n)): it covers the range, its mean is about half
// the ceiling, and loops that failed together do not pause alike.
func TestRetryBackoffIsFullJitter(t *testing.T) {
	const loops, retries = 4000, 10
	var sum [retries]time.Duration
	lo, hi := [retries]time.Duration{}, [retries]time.Duration{}
	for i := range lo {
		lo[i] = time.Hour
	}
	for range loops {
		for n, d := range client.RetryPauses(retries) {
			sum[n] += d
			lo[n], hi[n] = min(lo[n], d), max(hi[n], d)
		}
	}
	for n := range retries {
		ceiling := min(client.BackoffCap, client.BackoffBase<<n)
		mean := sum[n] / loops
		if lo[n] < 0 || hi[n] >= ceiling {
			t.Errorf("retry %d: pauses in [%v, %v], outside [0, %v)", n, lo[n], hi[n], ceiling)
		}
		if lo[n] > ceiling/20 || hi[n] < ceiling*19/20 {
			t.Errorf("retry %d: pauses in [%v, %v] do not cover [0, %v)", n, lo[n], hi[n], ceiling)
		}
		// The mean of 4000 uniform samples is within 5% of ceiling/2 but
		// for a chance far below one in a million.
		if d := mean - ceiling/2; d < -ceiling/20 || d > ceiling/20 {
			t.Errorf("retry %d: mean pause %v, want about %v", n, mean, ceiling/2)
		}
	}
}
