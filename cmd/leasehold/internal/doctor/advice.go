// Package doctor turns measured renewal latencies and the longest pause a
// process expects into a lease TTL and renewal interval (leasehold
// doctor). The arithmetic is here, apart from the measuring, so it can be
// tested on given numbers.
package doctor

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// Latencies are percentiles of measured renewal round trips.
type Latencies struct {
	Count               int
	P50, P99, P999, Max time.Duration
}

// Percentiles summarizes samples (in any order; it sorts a copy). The
// q-percentile is the smallest sample at or above a share q of them.
func Percentiles(samples []time.Duration) Latencies {
	s := slices.Clone(samples)
	slices.Sort(s)
	at := func(q float64) time.Duration {
		if len(s) == 0 {
			return 0
		}
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return Latencies{Count: len(s), P50: at(0.50), P99: at(0.99), P999: at(0.999), Max: at(1)}
}

// Inputs are what the recommendation depends on.
type Inputs struct {
	// MaxPause is the longest time the holder's process may stop running
	// (GC, swap, a VM migration, SIGSTOP) that its lease must survive.
	MaxPause time.Duration
	// Failover is added to the pause when leases must also survive a raft
	// leader change (renewals fail until a new leader is elected).
	Failover time.Duration
	// RenewP999 is the measured 99.9th percentile of a renewal round trip.
	RenewP999 time.Duration
	// RoundTrips is how many renewal round trips at RenewP999 must fit
	// after the pause: the renewal the pause delayed, and retries.
	RoundTrips int
	// Drift and DriftRatio are the client's safety margin: its deadline
	// is TTL - Drift - DriftRatio*TTL after a renewal's send
	// (client.Config; 10ms and 0.02 by default).
	Drift      time.Duration
	DriftRatio float64
}

// Bounds of a lease TTL the server accepts (the vocabulary's).
const (
	MinTTL = leasehold.MinTTL
	MaxTTL = leasehold.MaxTTL
)

// Advice is a recommended TTL and renewal interval, with the numbers that
// led to it.
type Advice struct {
	// Needed is the smallest TTL the rule allows; TTL is it rounded up
	// (to 100ms below 10s, to a second above) and within the server's
	// bounds.
	Needed, TTL time.Duration
	// RenewEvery is TTL/3: the client renews a third of the TTL after each
	// renewal's send.
	RenewEvery time.Duration
	// Slack is how much longer than MaxPause+Failover a pause may be
	// before the lease is lost, with TTL.
	Slack time.Duration
	// TooLong is set when the rule asks for more than MaxTTL.
	TooLong bool
}

// Recommend applies the rule. A holder renews TTL/3 after its last
// renewal's send and its deadline is TTL*(1-DriftRatio) - Drift after
// that send. The worst pause starts just before a renewal is due, so the
// lease survives when
//
//	TTL/3 + pause + RoundTrips*p99.9 <= TTL*(1-DriftRatio) - Drift
//
// that is
//
//	TTL >= (pause + RoundTrips*p99.9 + Drift) / (2/3 - DriftRatio)
//
// where pause is MaxPause + Failover.
func Recommend(in Inputs) (Advice, error) {
	switch {
	case in.MaxPause < 0 || in.Failover < 0 || in.RenewP999 < 0 || in.Drift < 0:
		return Advice{}, fmt.Errorf("durations must not be negative")
	case in.RoundTrips < 1:
		return Advice{}, fmt.Errorf("round trips must be at least 1, not %d", in.RoundTrips)
	case in.DriftRatio < 0 || in.DriftRatio >= 2.0/3:
		return Advice{}, fmt.Errorf("drift ratio %g must be in [0, 2/3)", in.DriftRatio)
	}
	budget := in.MaxPause + in.Failover + time.Duration(in.RoundTrips)*in.RenewP999 + in.Drift
	needed := time.Duration(math.Ceil(float64(budget) / (2.0/3 - in.DriftRatio)))
	ttl := roundUp(needed)
	a := Advice{Needed: needed, TTL: min(max(ttl, MinTTL), MaxTTL), TooLong: needed > MaxTTL}
	a.RenewEvery = a.TTL / 3
	usable := time.Duration(float64(a.TTL)*(1-in.DriftRatio)) - in.Drift - a.RenewEvery
	a.Slack = usable - time.Duration(in.RoundTrips)*in.RenewP999 - in.MaxPause - in.Failover
	return a, nil
}

// roundUp rounds d up to a TTL a person would write.
func roundUp(d time.Duration) time.Duration {
	step := 100 * time.Millisecond
	if d > 10*time.Second {
		step = time.Second
	}
	return (d + step - 1) / step * step
}

// Rule is the rule as printed, with the inputs' numbers.
func Rule(in Inputs) string {
	return fmt.Sprintf("min TTL = (max pause %v + failover %v + %d x renewal p99.9 %v + drift %v) / (2/3 - drift ratio %g); renew every TTL/3",
		in.MaxPause, in.Failover, in.RoundTrips, in.RenewP999, in.Drift, in.DriftRatio)
}
