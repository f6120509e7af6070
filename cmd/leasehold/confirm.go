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

// requireReason refuses a blank --reason with a usage error; why says
// what the reason is for ("why the queue is deleted").
func requireReason(reason, why string) error {
	if strings.TrimSpace(reason) == "" {
		return usagef("--reason is required: %s (kept in the audit log)", why)
	}
	return nil
}

// confirmAudited is the start of an audited destructive command: a
// non-blank --reason first, then the typed confirmation.
func confirmAudited(cmd *cobra.Command, reason, why string, yes bool, prompt, notDone string) error {
	if err := requireReason(reason, why); err != nil {
		return err
	}
	return confirm(cmd, yes, prompt, notDone)
}
