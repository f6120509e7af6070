package client

import "time"

// StallRenewals makes every renewal loop of c call stall when it wakes, as
// a paused process would not run it. Set it before the first acquire.
func StallRenewals(c *Client, stall func()) { c.renewalStall = stall }

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
