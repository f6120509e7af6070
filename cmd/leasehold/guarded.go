package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
	"github.com/leasehold/leasehold/internal/watchdog"
)

// guardedChild is a command that run and elect keep alive only while a
// lease holds.
type guardedChild struct {
	name     string   // the leasehold subcommand, for messages
	what     string   // what the lease is, for messages: `the lease on "x"`
	argv     []string // the command
	env      []string // added to the environment: LEASEHOLD_TOKEN and the like
	ttl      time.Duration
	grace    time.Duration
	noCgroup bool
	verbose  bool // -v: say at start what guards the command
}

// dashArgs checks the arguments of run, elect and groups run: one name
// (what: RESOURCE, NAME, GROUP), then "--" and the command to run, or
// just the name if alone() (elect --observe). Mistakes are usage errors
// that show the right form.
func dashArgs(what string, alone func() bool) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		dash := cmd.ArgsLenAtDash()
		form, _, _ := strings.Cut(cmd.Use, " | ") // elect's Use shows --observe too
		usage := cmd.Parent().CommandPath() + " " + form
		switch {
		case alone != nil && alone():
			if len(args) != 1 || dash >= 0 {
				return usagef("give only %s, and no command, with --observe", what)
			}
			return nil
		case dash < 0 && len(args) > 1:
			return usagef("put -- before the command, so that its flags are not taken for leasehold's: %s", usage)
		case dash < 0 && len(args) == 1 || dash == 1 && len(args) == 1:
			return usagef("no command to run: %s", usage)
		case dash != 1:
			return usagef("give one %s before --: %s", what, usage)
		}
		return nil
	}
}

// lookCommand finds the command to run as a shell would, and fails with
// the shell's status if it cannot: 127 not found, 126 not executable.
// run and elect call it before they take the lease, so that no lease is
// held for a command that cannot start.
func lookCommand(name string) (string, error) {
	path, err := exec.LookPath(name)
	switch {
	case err == nil:
		return path, nil
	case errors.Is(err, fs.ErrPermission):
		return "", exitError{code: exitNotExecutable, err: fmt.Errorf("%s: not executable: %w", name, err)}
	default:
		return "", exitError{code: exitNoCommand, err: fmt.Errorf("%s: command not found: %w", name, err)}
	}
}

// noLease is the error of run or elect when the lease could not be had:
// exit 125, unless the request itself was invalid (2).
func noLease(err error) error {
	if exitCode(err) == exitUsage {
		return err
	}
	return exitError{code: exitNoLease, err: fmt.Errorf("could not get the lease: %w", err)}
}

// printRunResult prints res, run's or elect's -o json output, with how
// err (the command's outcome) ends it: the last document on stdout, after
// the command's own output.
func printRunResult(res *cliout.RunResult, err error) {
	res.ExitCode = exitCode(err)
	res.LeaseLost = res.ExitCode == exitLeaseLost
	var ee exitError
	if err != nil && (!errors.As(err, &ee) || ee.err != nil) {
		res.Error = err.Error()
	}
	writeJSON(os.Stdout, res)
}

// guarded runs c.argv under the watchdog (internal/watchdog) while l
// holds, stops it in time if l cannot be kept, releases l once the
// command's whole tree is gone, and returns the exit status for the
// command's end (124 if it had to be stopped).
func guarded(l *client.Lease, c guardedChild) error {
	keep := false // true: the child could not be confirmed dead
	defer func() {
		if keep {
			return
		}
		// A lease already lost here had its command stopped in time: the
		// release's "work ran without it" would be false.
		lost := l.Err() != nil
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := l.Release(rctx); err != nil && !lost {
			fmt.Fprintf(os.Stderr, "leasehold %s: release: %v\n", c.name, err)
		}
	}()

	// Pass SIGINT and SIGTERM on to the child; the lease is kept until it
	// exits. Registered before the start so that no signal is missed.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	o, who, gone, err := superviseChild(l, c, sigs)
	if err != nil {
		return err
	}
	if !gone {
		keep = true
		fmt.Fprintf(os.Stderr, "leasehold %s: processes of the command still run 10s after SIGKILL; %s is left to expire instead of being released\n", c.name, c.what)
	}
	switch {
	case o.Stopped != "" && o.LeaseLost:
		why := o.Stopped
		if err := l.Err(); err != nil {
			why = err.Error()
		}
		fmt.Fprintf(os.Stderr, "leasehold %s: %s could not be kept (%s); the command was stopped before the lease's local deadline (%s)\n",
			c.name, c.what, why, who)
		return exitError{code: exitLeaseLost}
	case o.Stopped != "":
		fmt.Fprintf(os.Stderr, "leasehold %s: the command was stopped: %s (%s)\n", c.name, o.Stopped, who)
		return exitError{code: exitLeaseLost}
	case o.ExitCode() != 0:
		return exitError{code: o.ExitCode()}
	}
	return nil
}

// superviseChild runs c.argv under the watchdog (internal/watchdog) while l
// holds, passing signals from sigs on to it, and stops it in time if l
// cannot be kept. who says which watchdog guards the command and how;
// gone reports that the command's whole tree was seen gone: only then may
// what l stands for be given up.
func superviseChild(l watchdog.Lease, c guardedChild, sigs <-chan os.Signal) (o watchdog.Outcome, who string, gone bool, err error) {
	path, err := lookCommand(c.argv[0])
	if err != nil {
		return o, "", false, err
	}
	// The child runs under a watchdog process that holds the lease's
	// deadline even while this process is stopped or dead.
	wd, err := watchdog.Start(watchdog.Config{
		Path: path, Args: c.argv, Env: append(os.Environ(), c.env...),
		Deadline: l.Deadline(), TTL: c.ttl, Grace: c.grace, KillMargin: killMargin,
		NoCgroup: c.noCgroup,
	})
	if err != nil {
		return o, "", false, fmt.Errorf("start %s: %w", c.argv[0], err)
	}
	who = fmt.Sprintf("watchdog pid %d guards pid %d (%s)", wd.WatchdogPid(), wd.ChildPid(), wd.Mechanism())
	if c.verbose {
		fmt.Fprintf(os.Stderr, "leasehold %s: %s\n", c.name, who)
	}
	o = watchdog.Supervise(l, wd, sigs)
	// Nothing the child left running may outlive the lease.
	return o, who, wd.Close(10 * time.Second), nil
}
