package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"
)

// cliDocs is the CLI reference, one markdown file per command, made from
// the cobra tree by cobra/doc (hidden commands stay out).
const cliDocs = "../../docs/cli"

// docs/cli is the cobra tree's reference as it is now; LEASEHOLD_WRITE_DOCS=1
// writes it anew (and removes the pages of commands that are gone).
func TestCLIReferenceIsCurrent(t *testing.T) {
	write := os.Getenv("LEASEHOLD_WRITE_DOCS") == "1"
	want := genCLIDocs(t)
	if write {
		writeCLIDocs(t, want)
		return
	}
	have := readCLIDocs(t)
	for name, text := range want {
		switch got, ok := have[name]; {
		case !ok:
			t.Errorf("docs/cli/%s is missing", name)
		case !bytes.Equal(got, text):
			t.Errorf("docs/cli/%s is not the command's help as it is now", name)
		}
	}
	for name := range have {
		if _, ok := want[name]; !ok {
			t.Errorf("docs/cli/%s documents no command (a hidden or removed one)", name)
		}
	}
	if t.Failed() {
		t.Log("regenerate: LEASEHOLD_WRITE_DOCS=1 go test ./cmd/leasehold -run TestCLIReferenceIsCurrent")
	}
}

// genCLIDocs renders the tree into a temporary directory and returns its
// files by name. The flags' defaults are the ones a user without
// LEASEHOLD_ variables sees, with this host and process written HOST/PID,
// so the pages do not depend on where they were made.
func genCLIDocs(t *testing.T) map[string][]byte {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "LEASEHOLD_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	root := newRoot()
	root.DisableAutoGenTag = true
	host, _ := os.Hostname()
	hostPID := fmt.Sprintf("%s/%d", host, os.Getpid())
	walkCommands(root, func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			f.DefValue = strings.ReplaceAll(f.DefValue, hostPID, "HOST/PID")
		})
	})
	dir := t.TempDir()
	if err := doc.GenMarkdownTree(root, dir); err != nil {
		t.Fatal(err)
	}
	return readMarkdown(t, dir)
}

func walkCommands(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, sub := range c.Commands() {
		walkCommands(sub, f)
	}
}

func readCLIDocs(t *testing.T) map[string][]byte {
	if _, err := os.Stat(cliDocs); os.IsNotExist(err) {
		return nil
	}
	return readMarkdown(t, cliDocs)
}

func readMarkdown(t *testing.T, dir string) map[string][]byte {
	paths, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = b
	}
	return files
}

func writeCLIDocs(t *testing.T, want map[string][]byte) {
	if err := os.MkdirAll(cliDocs, 0o755); err != nil {
		t.Fatal(err)
	}
	for name := range readCLIDocs(t) {
		if _, ok := want[name]; !ok {
			if err := os.Remove(filepath.Join(cliDocs, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, text := range want {
		if err := os.WriteFile(filepath.Join(cliDocs, name), text, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
