package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
	"github.com/leasehold/leasehold/internal/watchdog"
)

// killMargin is how long before the local safe deadline the child must
// already have been sent SIGKILL: time for the kernel to end it.
const killMargin = 250 * time.Millisecond

type runFlags struct {
	ttl, grace         time.Duration
	wait               waitFlag
	lockDelay, maxHold time.Duration
	owner, operation   string
	cgroup             string
	limit              int
	verbose            bool
	out                *output
}

func newRun(g *globals) *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run RESOURCE [flags] -- CMD [ARGS...]",
		Short: "Run a command while holding a lease on RESOURCE",
		Long: `Acquires RESOURCE, runs CMD with LEASEHOLD_TOKEN, LEASEHOLD_RESOURCE and
LEASEHOLD_LEASE_ID in its environment, and renews the lease while CMD lives.
If renewal fails, CMD (its whole tree) gets SIGTERM early enough that, after
--grace and a SIGKILL, it is gone before the lease's local safe deadline: it
never runs while someone else may hold the lease. A watchdog process holds that
deadline too, so this holds even if run itself is stopped or killed. On CMD's
exit the lease is released and run exits with CMD's status: 124 if CMD had to
be stopped, 125 if the lease could not be had, 126 if CMD is not executable,
127 if it was not found (leasehold help exit-codes). With --limit N, RESOURCE
is a semaphore of N holders: LEASEHOLD_RESOURCE is then the slot held
(RESOURCE#i), the name to fence with LEASEHOLD_TOKEN. -v says at start which
watchdog guards CMD and how; a stop message says so anyway. With -o json the
last document on stdout, after CMD's own output, says what became of the
lease and CMD. --wait forever waits in line until granted or interrupted.`,
		Args: dashArgs("RESOURCE", nil),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.cgroup != "auto" && f.cgroup != "off" {
				return usagef("--cgroup %q: want auto or off", f.cgroup)
			}
			if !cmd.Flags().Changed("grace") {
				f.grace = defaultGrace(f.ttl)
			}
			return run(cmd.Context(), g, f, args[0], args[1:])
		},
	}
	fl := cmd.Flags()
	durationVar(fl, &f.ttl, "ttl", leasehold.DefaultTTL, "lease time to live")
	waitVar(fl, &f.wait, time.Minute, "how long to queue for the resource: a duration, or forever (until granted or interrupted)")
	durationVar(fl, &f.grace, "grace", 2*time.Second, "time between SIGTERM and SIGKILL when the lease cannot be kept (less for a --ttl under 8.5s)")
	fl.StringVar(&f.owner, "owner", defaultOwner(), "who holds the lease (shown to operators)")
	fl.StringVar(&f.operation, "operation", "", "what the command does (default: the command's name)")
	fl.StringVar(&f.cgroup, "cgroup", "auto", "auto: the command's tree in its own cgroup v2 where one can be created; off: its process group")
	durationVar(fl, &f.lockDelay, "lock-delay", 0, "keep the resource blocked this long after an expiry")
	durationVar(fl, &f.maxHold, "max-hold", 0, "end the lease (and stop CMD) at this age however often it is renewed")
	fl.IntVar(&f.limit, "limit", 0, "make RESOURCE a semaphore of this many concurrent holders (0: a lock)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "say at start which watchdog process guards CMD and how (cgroup or process group)")
	f.out = addOutput(cmd)
	return cmd
}

// newWatchdog is the hidden subcommand that run starts between itself and
// the command (internal/watchdog); not for people.
func newWatchdog() *cobra.Command {
	return &cobra.Command{
		Use:                watchdog.Subcommand,
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := watchdog.Main(args); code != 0 {
				return exitError{code: code}
			}
			return nil
		},
	}
}

// defaultGrace is --grace when it is not given: 2s, or less for a short TTL,
// so that SIGTERM still comes well before the lease can lapse.
func defaultGrace(ttl time.Duration) time.Duration {
	return max(0, min(2*time.Second, (ttl/2-killMargin)/2))
}

func run(ctx context.Context, g *globals, f *runFlags, resource string, argv []string) (err error) {
	res := cliout.RunResult{Resource: resource}
	if f.out.JSON() {
		defer func() { printRunResult(&res, err) }()
	}
	if f.grace < 0 || f.grace+killMargin >= f.ttl/2 {
		return usagef("--grace %v is too long for --ttl %v: SIGTERM must come well before the lease can lapse; use a grace under %v",
			f.grace, f.ttl, max(0, f.ttl/2-killMargin))
	}
	if f.operation == "" {
		f.operation = argv[0]
	}
	if _, err := lookCommand(argv[0]); err != nil {
		return err
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	// The child's being alive is the progress: renew without progress notes.
	l, err := inLine(ctx, g, f.wait, func(ctx context.Context, wait time.Duration) (*client.Lease, error) {
		return c.Acquire(ctx, resource, client.TTL(f.ttl), client.Wait(wait), client.Owner(f.owner), client.Operation(f.operation),
			client.LockDelay(f.lockDelay), client.MaxHold(f.maxHold), client.ProgressTimeout(0), client.Semaphore(f.limit))
	})
	if err != nil {
		return noLease(err)
	}
	res.LeaseID, res.Token, res.Slot = l.ID(), l.Token(), l.Slot()
	fenced := resource
	if l.Slot() != "" {
		fenced = l.Slot() // a semaphore's holder fences its slot
	}
	return guarded(l, guardedChild{
		name: "run", what: fmt.Sprintf("the lease on %q", resource), argv: argv,
		env: []string{
			"LEASEHOLD_TOKEN=" + strconv.FormatUint(l.Token(), 10),
			"LEASEHOLD_RESOURCE=" + fenced,
			"LEASEHOLD_LEASE_ID=" + strconv.FormatUint(l.ID(), 10),
		},
		ttl: f.ttl, grace: f.grace, noCgroup: f.cgroup == "off", verbose: f.verbose,
	})
}
