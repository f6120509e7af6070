package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// mistake is one bad invocation of a command, by path.
type mistake struct {
	path []string // the command, without "leasehold"
	args []string // what follows it
}

func (m mistake) String() string { return strings.Join(append(slices.Clone(m.path), m.args...), " ") }

// badValues are values each kind of flag refuses.
var badValues = map[string]string{
	"duration": "soon", "int": "many", "int64": "many", "uint64": "-1", "uint32": "-1",
	"float64": "fast", "bool": "maybe", "format": "yaml",
}

// mistakesOf lists the mistakes every command of the tree under c must
// refuse: an unknown flag, a malformed value for each flag of a kind in
// badValues, too few or too many arguments where its argument check says
// so, and for a command that runs a command after "--" (run, elect, groups
// run), that command without the "--".
func mistakesOf(c *cobra.Command) []mistake {
	var ms []mistake
	path := strings.Fields(c.CommandPath())[1:]
	add := func(args ...string) { ms = append(ms, mistake{path, args}) }
	add("--no-such-flag")
	c.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if v, ok := badValues[f.Value.Type()]; ok && f.Name != "help" && f.Deprecated == "" {
			add("--" + f.Name + "=" + v)
		}
	})
	if c.Args != nil {
		if c.Args(c, nil) != nil {
			add()
		} else if c.Args(c, strings.Fields("a b c d e f g h i")) != nil {
			add(strings.Fields("a b c d e f g h i")...)
		}
	}
	if strings.Contains(c.Use, " -- CMD") {
		add("NAME", "true")
	}
	for _, sub := range c.Commands() {
		if !sub.Hidden {
			ms = append(ms, mistakesOf(sub)...)
		}
	}
	return ms
}

// TestEveryCommandRefusesBadUsage walks the whole command tree, so that a
// new command is covered too, and runs each mistake of mistakesOf through
// runMain, as main does: each must exit 2, print the mistake, and say what
// to do next, naming the command whose help to read. No node is needed: a
// bad command line is refused before any call (the endpoint is a closed
// port, so a command that did call would fail with 7, not 2).
// TestExitCodes runs a few of them through the binary.
func TestEveryCommandRefusesBadUsage(t *testing.T) {
	t.Setenv("LEASEHOLD_ENDPOINTS", "http://127.0.0.1:1")
	ms := append(mistakesOf(newRoot()),
		// Mistakes no rule of mistakesOf derives.
		mistake{[]string{"help"}, []string{"no-such-topic"}},
		mistake{[]string{"help"}, []string{"queue", "no-such-command"}},
		mistake{[]string{"run"}, []string{"R", "--wait", "never", "--", "true"}},
		mistake{[]string{"acquire"}, []string{"--auth-token", "a", "--token-file", "f", "R"}},
		mistake{[]string{"status"}, []string{"--endpoints", "ftp://127.0.0.1:1", "R"}})
	commands := map[string]bool{}
	for _, m := range ms {
		commands[strings.Join(m.path, " ")] = true
		var stdout, stderr bytes.Buffer
		code := runMain(context.Background(), append(slices.Clone(m.path), m.args...), &stdout, &stderr)
		hint := fmt.Sprintf("Run '%s --help' for usage.", strings.Join(append([]string{"leasehold"}, m.path...), " "))
		if e := stderr.String(); code != exitUsage || !strings.HasPrefix(e, "leasehold: ") || !strings.HasSuffix(e, "\n"+hint+"\n") {
			t.Errorf("leasehold %s: exit %d; want %d, the mistake, then %q\nstderr: %s", m, code, exitUsage, hint, e)
		}
	}
	t.Logf("%d mistakes of %d commands refused", len(ms), len(commands))
}
