package client

import "time"

// RetryPauses are the pauses one retry loop takes before its first n
// retries.
func RetryPauses(n int) []time.Duration {
	var b backoff
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = b.next()
	}
	return out
}

// Backoff's base and cap.
const BackoffBase, BackoffCap = backoffBase, backoffCap
