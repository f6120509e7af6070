// Package torture is `leasehold torture`: a mixed workload of every
// primitive against a cluster, faults injected between or during its
// phases, every operation recorded, and the history checked against the
// invariants by package history.
package torture

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/leasehold/leasehold/client"
)

// The workload's shape. TTLs are short so that a fault of a few seconds
// outlives leases, and the history shows what happens then.
const (
	leaseTTL        = 3 * time.Second
	opTimeout       = 8 * time.Second // one call: rides out an election
	leaseResources  = 4
	kvGroups        = 2
	queueKeys       = 8
	queueVisibility = 3 * time.Second
	elections       = 2
	groupPartitions = 4
	groupMembers    = 3
	idemKeys        = 4
	idemKeyEvery    = 10 * time.Second // new idempotency keys this often
	idemRetention   = 10 * time.Minute
	stallOneIn      = 8

	// The Go client's default drift allowance (client.Config).
	clientDrift      = 10 * time.Millisecond
	clientDriftRatio = 0.02
)

// Fault classes.
const (
	FaultPause     = "pause"
	FaultKill      = "kill"
	FaultPartition = "partition"
	FaultSkew      = "skew"
	FaultNone      = "none"
)

// FaultClasses are the classes --faults may name.
var FaultClasses = []string{FaultPause, FaultKill, FaultPartition, FaultSkew, FaultNone}

// Config is one run.
type Config struct {
	// Endpoints of the cluster under test (ignored with Local).
	Endpoints []string
	// ClientConfig makes a Go client's configuration (auth, TLS); each
	// worker gets its own client from it, with Endpoints set.
	ClientConfig func() (client.Config, error)
	// Prefix is put before every name the run makes; it ends in "/".
	Prefix   string
	Duration time.Duration
	Workers  int
	// Local, if 3 or 5, starts that many `Bin serve` nodes in a temp dir
	// and injects Faults into them.
	Local  int
	Bin    string
	Faults []string
	// SkewRate is how far from real time the local nodes' clocks run
	// with the skew class: one node at 1+SkewRate, one at 1-SkewRate.
	SkewRate float64
	// FaultCmd, if set, runs (sh -c) between phases against Endpoints.
	FaultCmd string
	// FaultEvery is the length of a phase: quiet, then a fault.
	FaultEvery time.Duration
	// History, if set, receives every operation as a JSON line.
	History io.Writer
	// Progress, if set, is a terminal for a progress bar. Log, if set,
	// gets the run's messages (each fault, the checks) and, without
	// Progress, a progress line every 10s.
	Progress io.Writer
	Log      io.Writer
	// UnsafeSkipFence makes the stale writes go unfenced: a resource that
	// does not check tokens. For tests that the checks catch it.
	UnsafeSkipFence bool
}

// Validate checks the configuration, naming the flag at fault.
func (c *Config) Validate() error {
	switch {
	case c.Local != 0 && c.Local != 3 && c.Local != 5:
		return fmt.Errorf("--local is %d; it must be 3 or 5", c.Local)
	case c.Local == 0 && len(c.Endpoints) == 0:
		return fmt.Errorf("--endpoints names no node")
	case c.Duration < 5*time.Second:
		return fmt.Errorf("--duration is %v; the least is 5s", c.Duration)
	case c.Workers < 1 || c.Workers > 256:
		return fmt.Errorf("--workers is %d; it must be 1 to 256", c.Workers)
	case c.Prefix == "" || !strings.HasSuffix(c.Prefix, "/"):
		return fmt.Errorf("--prefix %q must end in /", c.Prefix)
	case c.FaultEvery < 2*time.Second:
		return fmt.Errorf("--fault-every is %v; the least is 2s", c.FaultEvery)
	case c.SkewRate < 0 || c.SkewRate >= 0.5:
		return fmt.Errorf("--skew-rate is %v; it must be at least 0 and below 0.5", c.SkewRate)
	}
	for _, f := range c.Faults {
		if !slices.Contains(FaultClasses, f) {
			return fmt.Errorf("--faults: unknown class %q (want %s)", f, strings.Join(FaultClasses, ", "))
		}
		if f != FaultNone && c.Local == 0 {
			return fmt.Errorf("--faults %s needs --local (torture injects faults only into nodes it started; use --fault-cmd for your own)", f)
		}
	}
	if c.FaultCmd != "" && c.Local != 0 {
		return fmt.Errorf("--fault-cmd is for your own cluster; with --local, choose --faults")
	}
	return nil
}

// faulty reports whether class is among the faults to inject.
func (c *Config) faulty(class string) bool { return slices.Contains(c.Faults, class) }
