package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/groups"
)

type groupsRunFlags struct {
	member     string
	ttl, grace time.Duration
	cgroup     string
	verbose    bool
}

func newGroupsRun(g *globals) *cobra.Command {
	f := &groupsRunFlags{}
	cmd := &cobra.Command{
		Use:   "run GROUP --member M [flags] -- CMD [ARGS...]",
		Short: "Join GROUP as member M and run CMD once per partition M owns",
		Long: `Joins GROUP as member M and, for each partition assigned to M, runs CMD with
LEASEHOLD_GROUP, LEASEHOLD_MEMBER, LEASEHOLD_PARTITION and LEASEHOLD_TOKEN (the
partition's epoch, a fencing token) in its environment. Each child is kept as
"leasehold run" keeps its command: when its partition is revoked it gets SIGTERM,
and SIGKILL after --grace, and the revocation is acknowledged only once its whole
tree is gone; if the session cannot be renewed, a watchdog process stops it before
the session's local safe deadline, even if this process is stopped or killed.
A child that exits with a non-zero status is started again (with a backoff) while
the partition is still M's; one that exits 0 leaves its partition idle until it is
revoked. A lost session is joined again. On SIGINT or SIGTERM every child is
stopped, M leaves the group, and groups run exits 0. Exit statuses: 2 a usage
mistake, 125 the group could not be joined (no such group, refused), 126 CMD is
not executable, 127 CMD was not found. A lost session does not end groups run (its
children are stopped and it joins again), so it never exits 124.`,
		Args:              dashArgs("GROUP", nil),
		ValidArgsFunction: completeFirst(g, groupNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.member == "" {
				return usagef("--member is required: this member's name in the group, unique among its members")
			}
			if f.cgroup != "auto" && f.cgroup != "off" {
				return usagef("--cgroup %q: want auto or off", f.cgroup)
			}
			if !cmd.Flags().Changed("grace") {
				f.grace = defaultGrace(f.ttl)
			}
			return groupsRun(cmd.Context(), g, f, args[0], args[1:])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.member, "member", "", "this member's name in the group (required)")
	fl.DurationVar(&f.ttl, "ttl", leasehold.DefaultTTL, "member session time to live")
	fl.DurationVar(&f.grace, "grace", 2*time.Second, "time between SIGTERM and SIGKILL when a partition is revoked or the session cannot be kept (less for a --ttl under 8.5s)")
	fl.StringVar(&f.cgroup, "cgroup", "auto", "auto: each child's tree in its own cgroup v2 where one can be created; off: its process group")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "say when each child starts which watchdog process guards it and how (cgroup or process group)")
	return cmd
}

func groupsRun(ctx context.Context, g *globals, f *groupsRunFlags, group string, argv []string) error {
	if f.grace < 0 || f.grace+killMargin >= f.ttl/2 {
		return usagef("--grace %v is too long for --ttl %v: SIGTERM must come well before the session can lapse; use a grace under %v",
			f.grace, f.ttl, max(0, f.ttl/2-killMargin))
	}
	if _, err := lookCommand(argv[0]); err != nil {
		return err
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	defer c.Close()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("cmd", "groups run")
	child := func(ctx context.Context, partition int, epoch uint64) error {
		return runPartitionChild(ctx, f, group, partition, epoch, argv)
	}
	// Cancel a partition when the watchdog would send SIGTERM: both stop
	// the child by the session's deadline.
	err = groups.Run(ctx, c, group, f.member, child, groups.TTL(f.ttl), groups.StopMargin(f.grace+killMargin), groups.Logger(log))
	if err != nil && exitCode(err) != exitUsage { // an invalid member name stays a usage error
		return exitError{code: exitNoLease, err: fmt.Errorf("groups run: %w", err)}
	}
	return err
}

// partitionLease is what the watchdog's supervisor needs of a partition
// (watchdog.Lease): the session's safe deadline, and an end.
type partitionLease struct {
	ctx  context.Context
	done chan struct{}
}

func (p *partitionLease) Deadline() time.Time   { return groups.SessionDeadline(p.ctx) }
func (p *partitionLease) Done() <-chan struct{} { return p.done }

// runPartitionChild runs one child for partition under the watchdog until
// it exits or ctx ends (revoked, session at risk, interrupted): then
// SIGTERM, and after the grace SIGKILL of its whole tree. It returns only
// once the tree is gone, so that the revocation is acknowledged only then.
func runPartitionChild(ctx context.Context, f *groupsRunFlags, group string, partition int, epoch uint64, argv []string) error {
	pl := &partitionLease{ctx: ctx, done: make(chan struct{})}
	sigs := make(chan os.Signal, 1)
	finished := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			sigs <- syscall.SIGTERM
			t := time.NewTimer(f.grace)
			defer t.Stop()
			select {
			case <-t.C:
			case <-finished:
			}
			close(pl.done) // the supervisor kills the tree
		case <-finished:
		}
	}()
	o, _, gone, err := superviseChild(pl, guardedChild{
		name: fmt.Sprintf("groups run (partition %d)", partition), argv: argv,
		env: []string{
			"LEASEHOLD_GROUP=" + group,
			"LEASEHOLD_MEMBER=" + f.member,
			"LEASEHOLD_PARTITION=" + strconv.Itoa(partition),
			"LEASEHOLD_TOKEN=" + strconv.FormatUint(epoch, 10),
		},
		ttl: f.ttl, grace: f.grace, noCgroup: f.cgroup == "off", verbose: f.verbose,
	}, sigs)
	close(finished)
	if err != nil {
		return err
	}
	if !gone {
		// Never acknowledge while part of the tree may still act: let the
		// session lapse instead (the revocation's bound ends it).
		fmt.Fprintf(os.Stderr, "leasehold groups run: processes of partition %d's command still run 10s after SIGKILL; its revocation is left to lapse\n", partition)
		for time.Now().Before(groups.SessionDeadline(ctx)) {
			time.Sleep(100 * time.Millisecond)
		}
		return errors.New("the command's tree could not be confirmed gone")
	}
	switch {
	case o.Stopped != "":
		if ctx.Err() == nil {
			return fmt.Errorf("partition %d's command was stopped: %s", partition, o.Stopped)
		}
		return nil
	case o.ExitCode() != 0:
		return fmt.Errorf("partition %d's command exited with status %d", partition, o.ExitCode())
	}
	return nil
}
