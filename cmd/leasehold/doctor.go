package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/doctor"
)

type doctorFlags struct {
	maxPause, failover, window, drift time.Duration
	roundTrips                        int
	driftRatio                        float64
	resource                          string
	out                               *output
}

func newDoctor(g *globals) *cobra.Command {
	f := &doctorFlags{}
	cmd := &cobra.Command{
		Use:   "doctor --max-pause D [--window 10s] [--failover D] [--json]",
		Short: "Measure renewal latency against the cluster and recommend a lease TTL and renewal interval",
		Long: `Takes a lease on --resource and renews it back to back for --window,
measuring each renewal's round trip as the Go client sees it (p50, p99,
p99.9, max). Then, for the longest pause your holders must survive
(--max-pause: GC, swap, a VM migration), it recommends a TTL and renewal
interval by the rule

  min TTL = (max pause + failover + round trips x renewal p99.9 + drift)
            / (2/3 - drift ratio);   renew every TTL/3

A holder renews a third of the TTL after its last renewal's send, and its
own deadline is TTL x (1 - drift ratio) - drift after that send; the worst
pause starts just before a renewal is due. Add --failover (1s) if
leases must also survive a raft leader change. A longer TTL keeps a
crashed holder's resources blocked longer: that is the trade. See docs/concepts.md,
"Choosing a TTL".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("max-pause") {
				return usagef("--max-pause is required: the longest pause (GC, swap, VM migration) a holder must survive, e.g. --max-pause 2s")
			}
			if f.window <= 0 {
				return usagef("--window must be positive, not %v", f.window)
			}
			in := doctor.Inputs{MaxPause: f.maxPause, Failover: f.failover, RoundTrips: f.roundTrips,
				Drift: f.drift, DriftRatio: f.driftRatio}
			if _, err := doctor.Recommend(in); err != nil { // bad flags fail before any measuring
				return usagef("%v", err)
			}
			return runDoctor(cmd, g, f, in)
		},
	}
	host, _ := os.Hostname()
	fl := cmd.Flags()
	fl.DurationVar(&f.maxPause, "max-pause", 0, "the longest pause a holder's process must survive (required)")
	fl.DurationVar(&f.failover, "failover", 0, "added to the pause: how long renewals may fail during a leader change (under 1s measured: docs/elections.md)")
	fl.DurationVar(&f.window, "window", 10*time.Second, "how long to measure renewals")
	fl.IntVar(&f.roundTrips, "round-trips", 2, "renewal round trips at p99.9 that must fit after the pause (the delayed renewal and a retry)")
	// The Go client's defaults (client.Config Drift and DriftRatio).
	fl.DurationVar(&f.drift, "drift", clientDrift, "the client's fixed drift allowance")
	fl.Float64Var(&f.driftRatio, "drift-ratio", clientDriftRatio, "the client's drift allowance as a share of the TTL")
	fl.StringVar(&f.resource, "resource", fmt.Sprintf("leasehold-doctor/%s/%d", host, os.Getpid()), "the resource to take and renew while measuring")
	f.out = addOutput(cmd)
	return cmd
}

func runDoctor(cmd *cobra.Command, g *globals, f *doctorFlags, in doctor.Inputs) error {
	c, ctx, cancel, err := g.session(cmd, f.window)
	if err != nil {
		return err
	}
	defer cancel()
	lease, err := c.Acquire(ctx, f.resource, client.TTL(max(30*time.Second, 3*f.window)), client.ManualRenew(),
		client.Operation("leasehold doctor"))
	if err != nil {
		return fmt.Errorf("taking %s to measure renewals: %w", f.resource, err)
	}
	defer lease.Release(context.WithoutCancel(ctx))

	samples, failures, err := measureRenewals(ctx, lease, f.window)
	if err != nil {
		return err
	}
	lat := doctor.Percentiles(samples)
	in.RenewP999 = lat.P999.Round(time.Microsecond) // as printed
	a, err := doctor.Recommend(in)
	if err != nil {
		return err
	}
	us := func(d time.Duration) string { return d.Round(time.Microsecond).String() }
	rep := cliout.Doctor{
		Resource: f.resource, Window: cliout.Dur(f.window), Renewals: lat.Count, Failures: failures,
		Latency:  cliout.RenewLatency{P50: us(lat.P50), P99: us(lat.P99), P999: us(lat.P999), Max: us(lat.Max)},
		MaxPause: cliout.Dur(in.MaxPause), Failover: cliout.Dur(in.Failover), RoundTrips: in.RoundTrips,
		Drift: cliout.Dur(in.Drift), DriftRatio: in.DriftRatio,
		Needed: cliout.Dur(a.Needed), TTL: cliout.Dur(a.TTL), RenewEvery: cliout.Dur(a.RenewEvery),
		Slack: cliout.Dur(a.Slack), TooLong: a.TooLong, Rule: doctor.Rule(in),
	}
	return f.out.print(cmd.OutOrStdout(), rep, func(w io.Writer) error {
		return printDoctor(w, rep, lat.Count)
	})
}

// measureRenewals renews lease back to back for window and returns each
// successful renewal's round trip. A renewal that fails without losing the
// lease (unavailable, a timeout) is counted; a lost lease ends the run.
func measureRenewals(ctx context.Context, lease *client.Lease, window time.Duration) ([]time.Duration, int, error) {
	var samples []time.Duration
	failures := 0
	for end := time.Now().Add(window); time.Now().Before(end); {
		start := time.Now()
		err := lease.Renew(ctx)
		took := time.Since(start)
		switch {
		case err == nil:
			samples = append(samples, took)
		case ctx.Err() != nil:
			return nil, 0, ctx.Err()
		case errors.Is(err, client.ErrLeaseLost) || lease.Err() != nil:
			return nil, 0, fmt.Errorf("the lease used for measuring was lost after %s: %w", plural(len(samples), "renewal", ""), err)
		default:
			failures++
		}
	}
	if len(samples) == 0 {
		return nil, 0, fmt.Errorf("no renewal succeeded in %v (%d failed)", window, failures)
	}
	return samples, failures, nil
}

func printDoctor(w io.Writer, r cliout.Doctor, n int) error {
	fmt.Fprintf(w, "Renewal round trips (%d in %s, %d failed): p50 %s  p99 %s  p99.9 %s  max %s\n",
		r.Renewals, r.Window, r.Failures, r.Latency.P50, r.Latency.P99, r.Latency.P999, r.Latency.Max)
	if n < 1000 {
		fmt.Fprintf(w, "  (fewer than 1000 renewals: p99.9 is close to the maximum; measure longer with --window)\n")
	}
	fmt.Fprintf(w, "\nRule: %s\n", r.Rule)
	fmt.Fprintf(w, "Needs a TTL of at least %s.\n\n", r.Needed)
	if r.TooLong {
		fmt.Fprintf(w, "That is more than the server's 1h maximum: a pause of %s cannot be survived by a lease;\n"+
			"make the work resumable and fence its writes instead.\n", r.MaxPause)
		return nil
	}
	_, err := fmt.Fprintf(w, "Recommended: TTL %s, renew every %s (as the Go client does);\n"+
		"a pause up to %s longer than %s still keeps the lease. A crashed holder blocks its resources for up to %s.\n",
		r.TTL, r.RenewEvery, r.Slack, r.MaxPause, r.TTL)
	return err
}
