package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/client"
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
}

// guarded runs c.argv under the watchdog (internal/watchdog) while l
// holds, stops it in time if l cannot be kept, releases l once the
// command's whole tree is gone, and returns the exit status for the
// command's end (75 if it had to be stopped).
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
	o, gone, err := superviseChild(l, c, sigs)
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
		fmt.Fprintf(os.Stderr, "leasehold %s: %s could not be kept (%s); the command was stopped before the lease's local deadline\n",
			c.name, c.what, why)
		return exitError{exitLeaseLost}
	case o.Stopped != "":
		fmt.Fprintf(os.Stderr, "leasehold %s: the command was stopped: %s\n", c.name, o.Stopped)
		return exitError{exitLeaseLost}
	case o.ExitCode() != 0:
		return exitError{o.ExitCode()}
	}
	return nil
}

// superviseChild runs c.argv under the watchdog (internal/watchdog) while l
// holds, passing signals from sigs on to it, and stops it in time if l
// cannot be kept. gone reports that the command's whole tree was seen
// gone: only then may what l stands for be given up.
func superviseChild(l watchdog.Lease, c guardedChild, sigs <-chan os.Signal) (o watchdog.Outcome, gone bool, err error) {
	path, err := exec.LookPath(c.argv[0])
	if err != nil {
		return o, false, fmt.Errorf("start %s: %w", c.argv[0], err)
	}
	// The child runs under a watchdog process that holds the lease's
	// deadline even while this process is stopped or dead.
	wd, err := watchdog.Start(watchdog.Config{
		Path: path, Args: c.argv, Env: append(os.Environ(), c.env...),
		Deadline: l.Deadline(), TTL: c.ttl, Grace: c.grace, KillMargin: killMargin,
		NoCgroup: c.noCgroup,
	})
	if err != nil {
		return o, false, fmt.Errorf("start %s: %w", c.argv[0], err)
	}
	fmt.Fprintf(os.Stderr, "leasehold %s: watchdog pid %d guards pid %d (%s)\n", c.name, wd.WatchdogPid(), wd.ChildPid(), wd.Mechanism())
	o = watchdog.Supervise(l, wd, sigs)
	// Nothing the child left running may outlive the lease.
	return o, wd.Close(10 * time.Second), nil
}
