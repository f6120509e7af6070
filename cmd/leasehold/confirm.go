package main

import (
	"bufio"
	"errors"
	"fmt"

	"strings"

	"github.com/spf13/cobra"
)

// confirm asks for a typed "yes" on stdin, unless yes (--yes) is set.
// Without a terminal it refuses, so that a script must say --yes. notDone
// starts each refusal ("not released").
func confirm(cmd *cobra.Command, yes bool, prompt, notDone string) error {
	if yes {
		return nil
	}
	in := cmd.InOrStdin()
	if !stdinIsTerminal(in) {
		return usagef("%s: confirmation needs a terminal; pass --yes to confirm without one", notDone)
	}
	fmt.Fprint(cmd.ErrOrStderr(), prompt)
	answer, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && answer == "" {
		return errors.New(notDone + ": no answer on stdin; pass --yes to confirm without a terminal")
	}
	if strings.TrimSpace(answer) != "yes" {
		return errors.New(notDone + ": not confirmed")
	}
	return nil
}
