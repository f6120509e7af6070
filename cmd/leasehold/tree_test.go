package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Rules every command of the tree keeps: the tests walk it, so that a new
// command is held to them too.

// walk calls f for every command people use (hidden ones are not).
func walk(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, sub := range c.Commands() {
		if !sub.Hidden {
			walk(sub, f)
		}
	}
}

// namedFirst are the words a command's Use starts its first argument with
// when that argument names something the cluster has.
var namedFirst = map[string]bool{"RESOURCE": true, "KEY": true, "QUEUE": true, "GROUP": true, "NAME": true}

// makesNew are the commands whose first argument names something new, or
// something the cluster does not list: they complete nothing.
var makesNew = map[string]bool{
	"leasehold acquire": true, "leasehold run": true, "leasehold queue create": true,
	"leasehold groups create": true, "leasehold auth token": true,
}

// namedFlags are the flags that name something the cluster has.
var namedFlags = map[string]bool{"fence": true, "fence-group": true, "fence-queue": true, "group": true, "queue": true}

// TestNamedArgumentsComplete: every command whose first argument (or a
// flag) names a resource, key, queue, group or election completes it from
// the cluster, as `leasehold __complete` asks; TestCLIHabits/completion runs them.
func TestNamedArgumentsComplete(t *testing.T) {
	walk(newRoot(), func(c *cobra.Command) {
		words := strings.Fields(c.Use)
		if len(words) > 1 {
			first := strings.TrimSuffix(strings.Trim(words[1], "{[]"), "...")
			if namedFirst[first] && !makesNew[c.CommandPath()] && c.ValidArgsFunction == nil {
				t.Errorf("%s %s: completes no names (give it ValidArgsFunction: completeFirst)", c.CommandPath(), words[1])
			}
		}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if _, ok := c.GetFlagCompletionFunc(f.Name); namedFlags[f.Name] && f.Value.Type() == "string" && !ok {
				t.Errorf("%s --%s: completes no names (completeFlag)", c.CommandPath(), f.Name)
			}
		})
	})
}

// printsNoResult are the runnable commands without -o: they print no
// result of their own (a node's logs, a child's output, a script, help).
var printsNoResult = map[string]bool{
	"leasehold serve": true, "leasehold groups run": true, "leasehold help": true,
	"leasehold completion bash": true, "leasehold completion zsh": true,
	"leasehold completion fish": true, "leasehold completion powershell": true,
}

// TestEveryCommandHasOutputFlags: every command that prints a result takes
// -o json|table|wide and --json, the same flags from addOutput; the e2e
// test TestJSONOutputOfEveryCommand decodes each one's JSON.
func TestEveryCommandHasOutputFlags(t *testing.T) {
	walk(newRoot(), func(c *cobra.Command) {
		if !c.Runnable() || c.HasSubCommands() && c.Flags().Lookup("output") == nil || printsNoResult[c.CommandPath()] {
			return // a group of commands that shows only help
		}
		if o := c.Flags().Lookup("output"); o == nil || o.Shorthand != "o" || o.Value.Type() != "format" || c.Flags().Lookup("json") == nil {
			t.Errorf("%s: no -o json|table|wide and --json (addOutput)", c.CommandPath())
		}
	})
}
