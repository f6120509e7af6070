package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/api/leasehold"
)

// Exit codes, the same for every command (leasehold help exit-codes).
// Commands return errors; exitCode alone turns one into a status.
const (
	exitOK            = 0
	exitFailure       = 1   // any other failure
	exitUsage         = 2   // a bad flag, argument or command
	exitConflict      = 3   // held, already exists, a version or state conflict
	exitWaitTimeout   = 4   // waited the whole --wait without a grant
	exitNotHolder     = 5   // not the holder, a stale token, the lease is gone
	exitNotFound      = 6   // no such key, election, idempotency key, queue, group
	exitUnavailable   = 7   // no quorum, or no node answered within --timeout
	exitPermission    = 8   // unauthenticated or not allowed
	exitExhausted     = 9   // over a limit or rate: retry later
	exitLeaseLost     = 124 // run/elect stopped the command: the lease could not be kept
	exitNoLease       = 125 // run/elect could not get the lease
	exitNotExecutable = 126 // run/elect: the command is not executable
	exitNoCommand     = 127 // run/elect: the command was not found
)

// exitCodes is the table that help exit-codes and docs/cli.md show.
var exitCodes = []struct {
	code int
	what string
}{
	{exitOK, "success"},
	{exitFailure, "any other failure"},
	{exitUsage, "invalid usage: an unknown command, a bad flag or argument, a request the server refuses as invalid"},
	{exitConflict, "held, already exists or conflict: the resource is held, a version or state did not match"},
	{exitWaitTimeout, "wait timed out: no grant within --wait"},
	{exitNotHolder, "not the holder: a wrong secret, a stale fencing token, or the lease is gone (expired or released)"},
	{exitNotFound, "not found: no such key, election, idempotency key, queue or group"},
	{exitUnavailable, "unavailable: no quorum or leader, or no node answered within --timeout"},
	{exitPermission, "permission denied or unauthenticated"},
	{exitExhausted, "resource exhausted: over a limit or a rate (a full queue); retry later"},
	{exitLeaseLost, "run, elect: the command was stopped because the lease could not be kept"},
	{exitNoLease, "run, elect, groups run: the lease could not be had (held, wait timed out, unreachable, no such group, ...)"},
	{exitNotExecutable, "run, elect, groups run: the command is not executable"},
	{exitNoCommand, "run, elect, groups run: the command was not found"},
}

// Otherwise run and elect exit with the command's own status (128 + N if
// signal N ended it).

// exitError carries an exit status up to main, with the error that caused
// it if any (printed unless nil).
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return fmt.Sprintf("exit status %d", e.code)
}

func (e exitError) Unwrap() error { return e.err }

// usageError marks a mistake in the command line.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef is a usage error (exit 2) with a message for a person.
func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// errLeaseGone marks a lease that no longer exists when its holder speaks
// for it (release, renew): for the holder it means "not yours any more"
// (exit 5), where a missing key or queue is 6.
var errLeaseGone = errors.New("the lease is gone")

// goneError is err marked as errLeaseGone. It reads as err alone: the
// node's message says already that the lease is gone and why.
type goneError struct{ error }

func (e goneError) Unwrap() error      { return e.error }
func (goneError) Is(target error) bool { return target == errLeaseGone }

// leaseGone marks err, a not-found answer about a lease the caller holds,
// as errLeaseGone.
func leaseGone(err error) error {
	if errors.Is(err, leasehold.ErrNotFound) {
		return goneError{err}
	}
	return err
}

// exitCode is err's exit status: the one mapping from errors to codes.
func exitCode(err error) int {
	var ee exitError
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		return exitUsage
	case errors.Is(err, errLeaseGone):
		return exitNotHolder
	}
	switch leasehold.CodeOf(err) {
	case leasehold.CodeInvalid:
		return exitUsage
	case leasehold.CodeHeld, leasehold.CodeVersionMismatch:
		return exitConflict
	case leasehold.CodeWaitTimeout:
		return exitWaitTimeout
	case leasehold.CodeNotHolder, leasehold.CodeStaleToken:
		return exitNotHolder
	case leasehold.CodeNotFound:
		return exitNotFound
	case leasehold.CodeUnavailable:
		return exitUnavailable
	case leasehold.CodePermission, leasehold.CodeUnauthenticated:
		return exitPermission
	case leasehold.CodeLimit:
		return exitExhausted
	}
	if errors.Is(err, context.DeadlineExceeded) { // --timeout passed without an answer
		return exitUnavailable
	}
	return exitFailure
}

// strictUsage makes every command-line mistake a usage error: bad flags,
// wrong arguments, and unknown subcommands (also of command groups such as
// cluster, which cobra would otherwise answer with help and status 0).
func strictUsage(cmd *cobra.Command) {
	if cmd.HasSubCommands() {
		if cmd.Args == nil {
			cmd.Args = cobra.NoArgs
		}
		if !cmd.Runnable() { // cobra would answer any argument with help and 0
			cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
	}
	if args := cmd.Args; args != nil {
		cmd.Args = func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	for _, c := range cmd.Commands() {
		strictUsage(c)
	}
}

// strictHelp makes `leasehold help TOPIC` a usage error for a topic that
// does not exist (cobra's own help command prints the root's help and
// exits 0, so a typo looks like an answer).
func strictHelp(root *cobra.Command) {
	for _, h := range root.Commands() {
		if h.Name() != "help" {
			continue
		}
		h.Run = nil
		h.RunE = func(h *cobra.Command, args []string) error {
			cmd, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 {
				return usagef("no help topic %q: 'leasehold help' lists the commands and topics", strings.Join(args, " "))
			}
			return cmd.Help()
		}
	}
}

// newExitCodesHelp is `leasehold help exit-codes`.
func newExitCodesHelp() *cobra.Command {
	return &cobra.Command{
		Use:   "exit-codes",
		Short: "The exit statuses of every command",
		Long:  exitCodesText(),
	}
}

func exitCodesText() string {
	var b strings.Builder
	fmt.Fprintln(&b, "Every leasehold command exits with one of these statuses:")
	fmt.Fprintln(&b)
	writeExitCodes(&b)
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "Otherwise run and elect exit with the command's own status (128+N if signal N ended it).")
	fmt.Fprintln(&b, "groups run never exits 124: a lost session stops its children and it joins again.")
	fmt.Fprintln(&b, "A damaged backup file (snapshot inspect, restore) exits 1: the command line was right, the file is not.")
	return b.String()
}

func writeExitCodes(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, e := range exitCodes {
		fmt.Fprintf(tw, "  %d\t%s\n", e.code, e.what)
	}
	tw.Flush()
}
