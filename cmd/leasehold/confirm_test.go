package main

import (
	"strings"
	"testing"
)

// runCLI runs the CLI in process with stdin from a pipe-like reader (not a
// terminal) and returns the error and exit code.
func runCLI(args ...string) (int, error) {
	root := newRoot()
	root.SetArgs(args)
	root.SetIn(strings.NewReader(""))
	root.SetOut(new(strings.Builder))
	root.SetErr(new(strings.Builder))
	err := root.Execute()
	return exitCode(err), err
}

// TestAuditedCommandsRequireAReason: every audited destructive command
// refuses a missing or blank --reason as a usage error naming what the
// reason is for, before it asks anything or calls the cluster.
func TestAuditedCommandsRequireAReason(t *testing.T) {
	for _, tc := range []struct {
		args []string
		why  string
	}{
		{[]string{"groups", "delete", "orders", "--yes"}, "why the group is deleted"},
		{[]string{"queue", "delete", "jobs", "--yes", "--reason", "  "}, "why the queue is deleted"},
		{[]string{"queue", "purge", "jobs", "--yes"}, "why the messages are dropped"},
		{[]string{"force-release", "db", "--lease", "7", "--yes"}, "why the release is forced"},
	} {
		code, err := runCLI(append(tc.args, "--endpoints", "http://127.0.0.1:1")...)
		want := "--reason is required: " + tc.why + " (kept in the audit log)"
		if code != exitUsage || err == nil || err.Error() != want {
			t.Errorf("%s: exit %d, %v; want exit %d, %q", strings.Join(tc.args, " "), code, err, exitUsage, want)
		}
	}
}

// TestAuditedCommandsRefuseWithoutTerminal: with a reason but neither
// --yes nor a terminal, the command refuses with what was not done, and
// tells how to confirm.
func TestAuditedCommandsRefuseWithoutTerminal(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		notDone string
	}{
		{[]string{"groups", "delete", "orders"}, "not deleted"},
		{[]string{"queue", "delete", "jobs"}, "not deleted"},
		{[]string{"queue", "purge", "jobs"}, "not purged"},
	} {
		code, err := runCLI(append(tc.args, "--reason", "tidy up", "--endpoints", "http://127.0.0.1:1")...)
		want := tc.notDone + ": confirmation needs a terminal; pass --yes to confirm without one"
		if code != exitUsage || err == nil || err.Error() != want {
			t.Errorf("%s: exit %d, %v; want exit %d, %q", strings.Join(tc.args, " "), code, err, exitUsage, want)
		}
	}
}
