package doctor

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestPercentiles(t *testing.T) {
	var s []time.Duration
	for i := 1000; i >= 1; i-- { // out of order on purpose
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	got := Percentiles(s)
	want := Latencies{Count: 1000, P50: 500 * time.Millisecond, P99: 990 * time.Millisecond, P999: 999 * time.Millisecond, Max: time.Second}
	if got != want {
		t.Fatalf("Percentiles(1ms..1000ms) = %+v, want %+v", got, want)
	}
	if s[0] != time.Second {
		t.Fatal("Percentiles sorted the caller's slice")
	}
	if got := Percentiles([]time.Duration{7 * time.Millisecond}); got.P50 != 7*time.Millisecond || got.P999 != 7*time.Millisecond || got.Max != 7*time.Millisecond {
		t.Fatalf("one sample: %+v", got)
	}
	if got := Percentiles(nil); got != (Latencies{}) {
		t.Fatalf("no samples: %+v", got)
	}
}

func defaults(pause, p999 time.Duration) Inputs {
	return Inputs{MaxPause: pause, RenewP999: p999, RoundTrips: 2, Drift: 10 * time.Millisecond, DriftRatio: 0.02}
}

// The rule on given numbers, worked by hand.
func TestRecommendArithmetic(t *testing.T) {
	cases := []struct {
		name        string
		in          Inputs
		needed, ttl time.Duration
		renewEvery  time.Duration
		slack       time.Duration
		tooLong     bool
	}{
		// (2s + 2*20ms + 10ms) / (2/3 - 0.02) = 2.05s / 0.64667 = 3.170103093s -> 3.2s;
		// slack = 3.2s*0.98 - 10ms - 3.2s/3 - 2*20ms - 2s.
		{"2s pause, 20ms p99.9", defaults(2*time.Second, 20*time.Millisecond),
			3170103093, 3200 * time.Millisecond, 1066666666, 19333334, false},
		// (10s + 10ms + 10ms) / 0.64667 = 15.494845361s -> 16s (whole seconds above 10s);
		// slack = 16s*0.98 - 10ms - 16s/3 - 2*5ms - 10s.
		{"10s pause rounds to seconds", defaults(10*time.Second, 5*time.Millisecond),
			15494845361, 16 * time.Second, 5333333333, 326666667, false},
		// A leader change of 2s on top of a 1s pause: (3s + 2*4ms + 10ms) / 0.64667 = 4.6670s -> 4.7s.
		{"failover counts as pause", Inputs{MaxPause: time.Second, Failover: 2 * time.Second, RenewP999: 4 * time.Millisecond,
			RoundTrips: 2, Drift: 10 * time.Millisecond, DriftRatio: 0.02},
			4667010310, 4700 * time.Millisecond, 1566666666, 21333334, false},
		// Nothing to survive: the server's minimum TTL.
		{"no pause", Inputs{RenewP999: time.Millisecond, RoundTrips: 1, DriftRatio: 0},
			1500000, MinTTL, 33333333, 65666667, false},
		// (1h + 2ms + 10ms) / 0.64667 is past the server's maximum: capped and flagged.
		{"an hour's pause", defaults(time.Hour, time.Millisecond),
			5567028865980, MaxTTL, 20 * time.Minute, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := Recommend(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if a.Needed != c.needed || a.TTL != c.ttl || a.RenewEvery != c.renewEvery || a.TooLong != c.tooLong {
				t.Fatalf("Recommend(%+v) = %+v; want needed %v, TTL %v, renew every %v, too long %v",
					c.in, a, c.needed, c.ttl, c.renewEvery, c.tooLong)
			}
			if !c.tooLong && a.Slack != c.slack {
				t.Fatalf("slack %v, want %v", a.Slack, c.slack)
			}
			if c.tooLong && a.Slack >= 0 {
				t.Fatalf("a capped TTL reports slack %v; want it negative (the pause does not fit)", a.Slack)
			}
		})
	}
}

// Whatever the inputs, a lease with the recommended TTL survives the pause:
// a renewal due at TTL/3, delayed by the pause, then RoundTrips round trips
// at p99.9, all end before the client's deadline; and the TTL is not more
// than one rounding step above what the rule needs.
func TestRecommendedTTLSurvivesThePause(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		in := Inputs{
			MaxPause:   time.Duration(r.Int64N(int64(5 * time.Minute))),
			Failover:   time.Duration(r.Int64N(int64(5 * time.Second))),
			RenewP999:  time.Duration(r.Int64N(int64(time.Second))),
			RoundTrips: 1 + r.IntN(4),
			Drift:      time.Duration(r.Int64N(int64(100 * time.Millisecond))),
			DriftRatio: r.Float64() * 0.1,
		}
		a, err := Recommend(in)
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Duration(float64(a.TTL)*(1-in.DriftRatio)) - in.Drift
		renewed := a.TTL/3 + in.MaxPause + in.Failover + time.Duration(in.RoundTrips)*in.RenewP999
		if renewed > deadline || a.Slack < 0 {
			t.Fatalf("%+v: TTL %v: the renewal ends at %v, after the deadline %v (slack %v)", in, a.TTL, renewed, deadline, a.Slack)
		}
		if a.TTL-a.Needed >= time.Second || a.TTL < a.Needed {
			t.Fatalf("%+v: TTL %v for a need of %v", in, a.TTL, a.Needed)
		}
	}
}

func TestRecommendRefusesNonsense(t *testing.T) {
	for name, in := range map[string]Inputs{
		"negative pause":   {MaxPause: -time.Second, RoundTrips: 1},
		"no round trips":   {RoundTrips: 0},
		"drift ratio 0.7":  {RoundTrips: 1, DriftRatio: 0.7},
		"negative latency": {RenewP999: -1, RoundTrips: 1},
	} {
		if _, err := Recommend(in); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
