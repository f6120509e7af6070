package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/torture"
)

type tortureFlags struct {
	duration, faultEvery time.Duration
	workers, local       int
	prefix, faults       string
	faultCmd, history    string
	skewRate             float64
	unsafeSkipFence      bool
	out                  *output
}

func newTorture(g *globals) *cobra.Command {
	f := &tortureFlags{}
	cmd := &cobra.Command{
		Use:   "torture",
		Short: "Run a mixed workload of every primitive through faults and check the history against the invariants",
		Long: `Runs a workload of every primitive against --endpoints (or, with --local N,
against N nodes it starts itself): leases with fenced writes (and holders
that stall past their lease, then write with the old token), KV
transactions, a keyed queue, a partition group, elections and
idempotency keys. Every name it makes is under --prefix, and it removes
what it made when it ends (idempotency records expire after 10 minutes).

Faults: --fault-cmd runs your command (sh -c) between phases, say a script
that kills a pod; its exit status and output are recorded. With --local,
--faults picks the classes torture injects itself: pause (SIGSTOP the
leader or a follower, then SIGCONT), kill (SIGKILL and restart), skew
(nodes on clocks at 1, 1+r and 1-r times real time, and leadership moved
between them), partition, or none.

Every operation is recorded (--history FILE: one JSON line each) and the
history is checked: porcupine for KV/Txn linearizability; exclusion
windows and token order for leases, elections, partitions and
idempotency attempts; stale fenced writes; per-key order and one ack per
message for the queue; one completion per idempotency key. It prints
the figures and exits 1 if any violation was found, with the recorded
operations that show it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runTorture(cmd, g, f) },
	}
	fl := cmd.Flags()
	durationVar(fl, &f.duration, "duration", time.Minute, "how long the workload runs")
	fl.IntVar(&f.workers, "workers", 8, "concurrent workers (each its own client), besides 3 group members")
	fl.StringVar(&f.prefix, "prefix", "", "prefix of every name the run makes (default torture/RUNID/)")
	fl.IntVar(&f.local, "local", 0, "start this many nodes (3 or 5) in a temp dir and inject --faults into them")
	fl.StringVar(&f.faults, "faults", "pause,kill,partition,skew", "with --local: fault classes, comma-separated: "+strings.Join(torture.FaultClasses, ", "))
	fl.StringVar(&f.faultCmd, "fault-cmd", "", "run this shell command between phases (your own fault: kill a pod, ...)")
	durationVar(fl, &f.faultEvery, "fault-every", 10*time.Second, "a phase: half quiet, then a fault held for up to the other half")
	fl.StringVar(&f.history, "history", "", "write every operation to this file, one JSON line each")
	fl.Float64Var(&f.skewRate, "skew-rate", 0.01, "with --faults skew: the nodes' clocks run at 1, 1+RATE and 1-RATE times real time")
	fl.BoolVar(&f.unsafeSkipFence, "unsafe-skip-fence", false, "test only: stalled holders write without their fence, so the check must find stale writes")
	fl.MarkHidden("unsafe-skip-fence")
	f.out = addOutput(cmd)
	return cmd
}

func runTorture(cmd *cobra.Command, g *globals, f *tortureFlags) error {
	cfg := torture.Config{
		Duration: f.duration, Workers: f.workers, Local: f.local, FaultCmd: f.faultCmd, FaultEvery: f.faultEvery,
		SkewRate: f.skewRate, Prefix: f.prefix, UnsafeSkipFence: f.unsafeSkipFence, Log: cmd.ErrOrStderr(),
		ClientConfig: func() (client.Config, error) {
			cc, err := g.clientConfig()
			cc.Logger = slog.New(slog.DiscardHandler) // lost leases are the point: the history counts them
			return cc, err
		},
	}
	for _, c := range strings.Split(f.faults, ",") {
		if c = strings.TrimSpace(c); c != "" {
			cfg.Faults = append(cfg.Faults, c)
		}
	}
	if f.local == 0 && !cmd.Flags().Changed("faults") {
		cfg.Faults = nil // against your cluster: only --fault-cmd
	}
	if cfg.Prefix == "" {
		b := make([]byte, 4)
		rand.Read(b)
		cfg.Prefix = "torture/" + hex.EncodeToString(b) + "/"
	}
	for _, e := range strings.Split(g.endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			cfg.Endpoints = append(cfg.Endpoints, e)
		}
	}
	if err := cfg.Validate(); err != nil {
		return usagef("%v", err)
	}
	if f.local > 0 {
		bin, err := os.Executable()
		if err != nil {
			return err
		}
		cfg.Bin = bin
	}
	if f.history != "" {
		h, err := os.Create(f.history)
		if err != nil {
			return err
		}
		defer h.Close()
		cfg.History = h
	}
	if term.IsTerminal(int(os.Stderr.Fd())) {
		cfg.Progress = os.Stderr
	}
	rep, err := torture.Run(cmd.Context(), cfg)
	if rep == nil {
		return err
	}
	out := cmd.OutOrStdout()
	if f.out.JSON() {
		if werr := rep.WriteJSON(out); werr != nil {
			return werr
		}
	} else if werr := rep.WriteText(out); werr != nil {
		return werr
	}
	if err != nil {
		return err
	}
	if n := rep.Violated(); n > 0 {
		return exitError{code: exitFailure, err: fmt.Errorf("%d violations", n)}
	}
	if rep.Interrupted {
		return exitError{code: 130}
	}
	return nil
}
