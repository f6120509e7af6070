package main

import "github.com/spf13/cobra"

// The command tree, for the e2e tests (package main_test) to check that
// they cover every command.

// CommandOf is the path of the command that args run ("leasehold queue send").
func CommandOf(args []string) string {
	c, _, err := newRoot().Find(args)
	if err != nil {
		return ""
	}
	return c.CommandPath()
}

// CommandsWithOutput are the paths of the commands that take -o.
func CommandsWithOutput() []string {
	var paths []string
	walk(newRoot(), func(c *cobra.Command) {
		if c.LocalFlags().Lookup("output") != nil {
			paths = append(paths, c.CommandPath())
		}
	})
	return paths
}
