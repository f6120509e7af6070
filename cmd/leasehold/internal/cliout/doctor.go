package cliout

// Doctor is `leasehold doctor`'s report: renewal round trips measured
// against the cluster, and the TTL and renewal interval they call for.
// Latencies are Go duration strings rounded to the microsecond (a
// renewal on a LAN takes about a millisecond); the rest to the millisecond.
type Doctor struct {
	Resource   string       `json:"resource"`
	Window     string       `json:"window"`
	Renewals   int          `json:"renewals"`
	Failures   int          `json:"failures"`
	Latency    RenewLatency `json:"renew_latency"`
	MaxPause   string       `json:"max_pause"`
	Failover   string       `json:"failover"`
	RoundTrips int          `json:"round_trips"`
	Drift      string       `json:"drift"`
	DriftRatio float64      `json:"drift_ratio"`
	Needed     string       `json:"needed_ttl"`
	TTL        string       `json:"ttl"`
	RenewEvery string       `json:"renew_every"`
	Slack      string       `json:"slack"`
	TooLong    bool         `json:"too_long,omitempty"`
	Rule       string       `json:"rule"`
}

// RenewLatency are percentiles of renewal round trips.
type RenewLatency struct {
	P50  string `json:"p50"`
	P99  string `json:"p99"`
	P999 string `json:"p99_9"`
	Max  string `json:"max"`
}
