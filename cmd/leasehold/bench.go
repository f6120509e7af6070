package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/bench"
)

type benchFlags struct {
	embedded    bool
	workload    string
	clients     int
	resources   int
	leases      int
	hold        time.Duration
	ttl         time.Duration
	wait        time.Duration
	duration    time.Duration
	ops         int64
	warmup      time.Duration
	seed        uint64
	out         *output
	plot        string
	cpuprofile  string
	memprofile  string
	trace       string
	maxBatch    int
	maxInflight int
	shared      bool
	clientBatch int
	session     string
	noGzip      bool
	batch       int
	bodyBytes   int
	prefix      string
	leaveHeld   bool
}

func newBench(g *globals) *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure throughput, latency and fairness with the lock, renew, contend or queue workload",
		Long: `Runs a workload against --endpoints, or with --embedded against a node of its
own (fsync'd log in a temp dir, API on loopback), and prints throughput and
latency percentiles per operation.

  lock     each client acquires a random resource of --resources and releases
           it (after --hold); counts acquire+release pairs per second
  renew    holds --leases leases and renews each at ttl/3 from a pool of
           --clients workers; reports the renew rate and leases lost
  contend  every client queues for one resource, holds it --hold, releases;
           counts grants per second and how fairly clients were served
  queue    --clients producers send --body-bytes messages (--batch per send)
           to random keys of --resources in a keyed queue, and as many
           consumers receive (up to --batch) and ack them; counts messages
           acked per second and the latency from send to ack

Operations finishing during --warmup are not counted. The run ends after
--duration, or after --ops measured operations if given.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.ops > 0 && !cmd.Flags().Changed("duration") {
				f.duration = 0
			}
			return runBench(cmd, g, f)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.embedded, "embedded", false, "start an in-process node in a temp dir instead of using --endpoints")
	fl.StringVar(&f.workload, "workload", bench.Lock, "lock, renew, contend or queue")
	fl.IntVar(&f.clients, "clients", 16, "concurrent clients (renew: size of the renewal pool)")
	fl.IntVar(&f.resources, "resources", 1024, "lock: number of resources chosen from at random; queue: number of message keys")
	fl.IntVar(&f.batch, "batch", 1, "queue: messages per send and most per receive (1: no batches)")
	fl.IntVar(&f.bodyBytes, "body-bytes", 200, "queue: bytes per message")
	fl.IntVar(&f.leases, "leases", 1000, "renew: number of leases held")
	fl.StringVar(&f.prefix, "prefix", "bench/renew", "renew: the leases are named PREFIX/0, PREFIX/1, ...; give each of several runs at once its own")
	fl.BoolVar(&f.leaveHeld, "leave-held", false, "renew: at the end, leave the leases held (they lapse at their TTL) instead of releasing them")
	durationVar(fl, &f.hold, "hold", 0, "time spent holding each lease (critical section)")
	durationVar(fl, &f.ttl, "ttl", 0, "lease TTL (default 30s for renew, 15s otherwise)")
	durationVar(fl, &f.wait, "wait", 30*time.Second, "lock, contend: how long an acquire may queue behind a holder")
	durationVar(fl, &f.duration, "duration", 10*time.Second, "how long to measure, after the warm-up")
	fl.Int64Var(&f.ops, "ops", 0, "measure this many operations (pairs, grants or renewals) instead of a duration")
	durationVar(fl, &f.warmup, "warmup", time.Second, "time before measuring; its operations are not counted")
	fl.Uint64Var(&f.seed, "seed", 1, "seed for the choice of resources")
	f.out = addOutput(cmd)
	fl.StringVar(&f.plot, "plot", "", "write a latency percentile plot to this .svg file")
	fl.BoolVar(&f.shared, "shared", false, "lock, contend: the clients share one Go client (goroutines of one process), so their concurrent calls go out together in batch requests; queue: producers share one client and consumers another")
	fl.IntVar(&f.clientBatch, "client-max-batch", 0, "most calls a Go client sends in one batch request (0: client default; 1: no batching)")
	fl.StringVar(&f.session, "session", "", "on: the Go clients send lease calls on a session stream; off: as unary batch requests (empty: client default)")
	fl.StringVar(&f.cpuprofile, "cpuprofile", "", "write a CPU profile of the run (node included with --embedded)")
	fl.StringVar(&f.memprofile, "memprofile", "", "write an allocation profile of the run (node included with --embedded)")
	fl.StringVar(&f.trace, "trace", "", "write an execution trace of the run (go tool trace)")
	fl.IntVar(&f.maxBatch, "embedded-max-batch", 0, "with --embedded: commands merged into one log entry (0: node default)")
	fl.IntVar(&f.maxInflight, "embedded-max-inflight", 0, "with --embedded: log entries awaiting commit at once (0: node default)")
	fl.BoolVar(&f.noGzip, "no-gzip", false, "with --embedded: clients do not offer gzip, so responses come uncompressed")
	for _, h := range []string{"cpuprofile", "memprofile", "trace", "embedded-max-batch", "embedded-max-inflight", "no-gzip", "seed"} {
		fl.MarkHidden(h)
	}
	return cmd
}

func runBench(cmd *cobra.Command, g *globals, f *benchFlags) error {
	ctx := cmd.Context()
	cfg := bench.Config{
		Workload: f.workload, Clients: f.clients, Resources: f.resources, Leases: f.leases,
		Hold: f.hold, TTL: f.ttl, Wait: f.wait, Duration: f.duration, Ops: f.ops, Warmup: f.warmup,
		Seed: f.seed, NoCompression: f.noGzip, Shared: f.shared, MaxBatch: f.clientBatch,
		Batch: f.batch, BodyBytes: f.bodyBytes, LeasePrefix: f.prefix,
	}
	switch f.session {
	case "on":
		cfg.Session = client.SessionOn
	case "off":
		cfg.Session = client.SessionOff
	case "":
	default:
		return usagef("--session must be on or off (or empty for the client's default), not %q", f.session)
	}
	if f.plot != "" {
		if err := bench.PlotPath(f.plot); err != nil {
			return usagef("--%v", err)
		}
	}
	if f.embedded {
		cfg.Endpoints = []string{"http://placeholder"} // validated before the node starts
	} else {
		for _, e := range strings.Split(g.endpoints, ",") {
			if e = strings.TrimSpace(e); e != "" {
				cfg.Endpoints = append(cfg.Endpoints, e)
			}
		}
		cfg.Target = strings.Join(cfg.Endpoints, ",")
		cfg.Cleanup = !f.leaveHeld
		cfg.ClientConfig = func() (client.Config, error) { // --token-file and TLS flags apply
			cc, err := g.clientConfig()
			cc.Logger = slog.New(slog.DiscardHandler) // lost leases are counted in the report
			return cc, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if f.embedded {
		node, err := bench.StartEmbedded(ctx, bench.EmbeddedOptions{Tune: func(c *cluster.Config) {
			if f.maxBatch > 0 {
				c.MaxBatch = f.maxBatch
			}
			if f.maxInflight > 0 {
				c.MaxInflight = f.maxInflight
			}
		}})
		if err != nil {
			return err
		}
		defer node.Close()
		cfg.Endpoints = []string{node.URL}
		cfg.LogIndex = func() uint64 { return node.Node.Stats().CommitIndex }
		cfg.Target = "embedded node (single voter, fsync'd raft-wal log in a temp dir)"
	}
	if term.IsTerminal(int(os.Stderr.Fd())) {
		cfg.Progress = os.Stderr
	}
	// The CPU profile and the execution trace, if asked for, cover the run.
	for _, r := range []struct {
		path  string
		start func(io.Writer) error
		stop  func()
	}{{f.cpuprofile, pprof.StartCPUProfile, pprof.StopCPUProfile}, {f.trace, trace.Start, trace.Stop}} {
		if r.path == "" {
			continue
		}
		w, err := os.Create(r.path)
		if err != nil {
			return err
		}
		defer w.Close()
		if err := r.start(w); err != nil {
			return err
		}
		defer r.stop()
	}

	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if f.memprofile != "" {
		if err := writeAllocs(f.memprofile); err != nil {
			return err
		}
	}
	out := cmd.OutOrStdout()
	if f.out.JSON() {
		err = rep.WriteJSON(out)
	} else {
		err = rep.WriteText(out)
	}
	if err != nil {
		return err
	}
	if f.plot != "" {
		if err := rep.WritePlot(f.plot); err != nil {
			return err
		}
		fmt.Fprintln(cmd.ErrOrStderr(), "plot written to", f.plot)
	}
	if rep.Interrupted {
		return exitError{code: 130}
	}
	return nil
}

// writeAllocs writes the allocations made since the process started (the
// node's too with --embedded), for `go tool pprof -sample_index=alloc_space`.
func writeAllocs(path string) error {
	w, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(w, 0); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// startCPUProfile profiles this process into path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	w, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(w); err != nil {
		w.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); w.Close() }, nil
}
