package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/client"
)

// killMargin is how long before the local safe deadline the child must
// already have been sent SIGKILL: time for the kernel to end it.
const killMargin = 250 * time.Millisecond

// exitLeaseLost is run's status when it had to stop the child because the
// lease could not be kept (EX_TEMPFAIL).
const exitLeaseLost = 75

type runFlags struct {
	ttl, wait, grace time.Duration
	owner, operation string
}

func newRun(g *globals) *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run RESOURCE [flags] -- CMD [ARGS...]",
		Short: "Run a command while holding a lease on RESOURCE",
		Long: `Acquires RESOURCE, runs CMD with LEASEHOLD_TOKEN, LEASEHOLD_RESOURCE and
LEASEHOLD_LEASE_ID in its environment, and renews the lease while CMD lives.
If renewal fails, CMD (its whole process group) gets SIGTERM early enough that,
after --grace and a SIGKILL, it is gone before the lease's local safe deadline:
it never runs while someone else may hold the lease. On CMD's exit the lease is
released and run exits with CMD's status (75 if run had to stop CMD).`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 {
				return errors.New("usage: leasehold run RESOURCE [flags] -- CMD [ARGS...]")
			}
			if !cmd.Flags().Changed("grace") {
				f.grace = defaultGrace(f.ttl)
			}
			return run(cmd.Context(), g, f, args[0], args[1:])
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&f.ttl, "ttl", 15*time.Second, "lease time to live")
	fl.DurationVar(&f.wait, "wait", time.Minute, "how long to queue for the resource")
	fl.DurationVar(&f.grace, "grace", 2*time.Second, "time between SIGTERM and SIGKILL when the lease cannot be kept (less for a --ttl under 8.5s)")
	fl.StringVar(&f.owner, "owner", defaultOwner(), "who holds the lease (shown to operators)")
	fl.StringVar(&f.operation, "operation", "", "what the command does (default: the command's name)")
	return cmd
}

// defaultGrace is --grace when it is not given: 2s, or less for a short TTL,
// so that SIGTERM still comes well before the lease can lapse.
func defaultGrace(ttl time.Duration) time.Duration {
	return max(0, min(2*time.Second, (ttl/2-killMargin)/2))
}

func run(ctx context.Context, g *globals, f *runFlags, resource string, argv []string) error {
	if f.grace < 0 || f.grace+killMargin >= f.ttl/2 {
		return fmt.Errorf("--grace %v is too long for --ttl %v: SIGTERM must come well before the lease can lapse; use a grace under %v",
			f.grace, f.ttl, max(0, f.ttl/2-killMargin))
	}
	if f.operation == "" {
		f.operation = argv[0]
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	// The child's being alive is the progress: renew without progress notes.
	actx, cancel := g.ctx(ctx, f.wait)
	l, err := c.Acquire(actx, resource, client.TTL(f.ttl), client.Wait(f.wait), client.Owner(f.owner),
		client.Operation(f.operation), client.ProgressTimeout(0))
	cancel()
	if err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := l.Release(rctx); err != nil {
			fmt.Fprintln(os.Stderr, "leasehold run: release:", err)
		}
	}()

	child := exec.Command(argv[0], argv[1:]...)
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
	child.Env = append(os.Environ(),
		"LEASEHOLD_TOKEN="+strconv.FormatUint(l.Token(), 10),
		"LEASEHOLD_RESOURCE="+resource,
		"LEASEHOLD_LEASE_ID="+strconv.FormatUint(l.ID(), 10),
	)
	// Its own process group, so the kill reaches everything it started;
	// and killed with run, so it cannot outlive the lease if run dies.
	child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}

	// Pass SIGINT and SIGTERM on to the child; run keeps the lease until it
	// exits. Registered before the start so that no signal is missed.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	if err := child.Start(); err != nil {
		return fmt.Errorf("start %s: %w", argv[0], err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()

	pgid := child.Process.Pid
	waitErr, stopped := supervise(l, pgid, f.grace, exited, sigs)
	// Nothing the child left running in its group may outlive the lease,
	// which the deferred Release gives up.
	syscall.Kill(-pgid, syscall.SIGKILL)
	if stopped {
		why := "no renewal succeeded in time"
		if err := l.Err(); err != nil {
			why = err.Error()
		}
		fmt.Fprintf(os.Stderr, "leasehold run: the lease on %q could not be kept (%s); the command was stopped before the lease's local deadline\n",
			resource, why)
		return exitError{exitLeaseLost}
	}
	return exitStatus(waitErr)
}

// supervise waits for the child to exit. If the lease's local deadline comes
// near without a renewal, it sends SIGTERM to the child's group at
// deadline - grace - killMargin and SIGKILL at deadline - killMargin; if the
// lease is lost outright it sends SIGKILL at once. It reports whether it
// had to stop the child.
func supervise(l *client.Lease, pgid int, grace time.Duration, exited <-chan error, sigs <-chan os.Signal) (error, bool) {
	for {
		deadline := l.Deadline()
		term := time.NewTimer(time.Until(deadline.Add(-grace - killMargin)))
		select {
		case err := <-exited:
			term.Stop()
			return err, false
		case s := <-sigs:
			term.Stop()
			syscall.Kill(-pgid, s.(syscall.Signal))
			continue
		case <-l.Done():
			term.Stop()
			if errors.Is(l.Err(), client.ErrReleased) {
				return <-exited, false
			}
			syscall.Kill(-pgid, syscall.SIGKILL)
			return <-exited, true
		case <-term.C:
		}
		if l.Deadline().After(deadline) {
			continue // renewed just now
		}
		syscall.Kill(-pgid, syscall.SIGTERM)
		kill := time.NewTimer(time.Until(deadline.Add(-killMargin)))
		select {
		case err := <-exited:
			kill.Stop()
			return err, true
		case <-kill.C:
			syscall.Kill(-pgid, syscall.SIGKILL)
			return <-exited, true
		}
	}
}

func exitStatus(err error) error {
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return exitError{128 + int(ws.Signal())}
		}
		return exitError{ee.ExitCode()}
	}
	return err
}
