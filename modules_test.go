package leasehold_test

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// serverModules are modules only the node needs (its consensus, storage,
// dashboard, tests and telemetry): a program that imports the client and
// the queue consumer must have none of them in its module graph. pgx is
// here too: only fence/pgfence needs it.
var serverModules = []string{
	"github.com/leasehold/leasehold ", // the root module: the node itself
	"github.com/hashicorp/raft ",
	"github.com/hashicorp/raft-wal ",
	"github.com/hashicorp/raft-boltdb",
	"go.etcd.io/bbolt ",
	"github.com/boltdb/bolt ",
	"github.com/jackc/pgx/",
	"github.com/chromedp/",
	"github.com/anishathalye/porcupine ",
	"pgregory.net/rapid ",
	"github.com/stretchr/testify ",
	"go.opentelemetry.io/",
	"github.com/prometheus/",
	"github.com/spf13/cobra ",
}

// TestClientConsumerPullsNoServerModules is what an application sees: a
// throwaway module in a temp dir whose program imports client and queue,
// its go.mod replacing every module of this repository by its directory
// (as go get of the tagged modules would fetch them), tidied with the
// environment's GOPROXY (CI's module cache after go mod download serves
// it offline), has none of serverModules in go list -m all.
func TestClientConsumerPullsNoServerModules(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Skip("no go command")
		}
	}
	repo, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()

	var mod, sum strings.Builder
	mod.WriteString("module example.com/consumer\n\ngo " + goVersion(t, "go.mod") + "\n\n")
	for path, d := range repoModules(t) {
		fmt.Fprintf(&mod, "replace %s => %s\n", path, filepath.Join(repo, d))
		// The go.sum lines the repository's modules already have: the
		// consumer's tidy adds no hash the checksum database must vouch for.
		b, err := os.ReadFile(filepath.Join(d, "go.sum"))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		sum.Write(b)
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", mod.String())
	write("go.sum", sum.String())
	write("main.go", `package main

import (
	"context"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/queue"
)

func main() {
	c, err := client.New(client.Config{Endpoints: []string{"http://127.0.0.1:7420"}})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	_ = queue.Consume(context.Background(), c, "jobs", func(context.Context, *queue.Message) error { return nil })
}
`)

	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, goBin, args...)
		cmd.Dir = dir
		// Outside this repository's workspace, as a user's module is.
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.Output()
		if err != nil {
			stderr := ""
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("go %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
		}
		return string(out)
	}
	run("mod", "tidy")
	run("build", "-o", os.DevNull, ".")
	// -e: a module whose .info is not in the cache (go mod download
	// fetches only the modules whose packages build) is still listed, and
	// the graph is what counts here.
	all := strings.Split(strings.TrimSpace(run("list", "-m", "-e", "all")), "\n")
	t.Logf("go list -m all of a program importing client and queue: %d modules\n%s", len(all)-1, strings.Join(all, "\n"))
	for _, m := range all[1:] {
		for _, bad := range serverModules {
			if strings.HasPrefix(m+" ", bad) {
				t.Errorf("the consumer's module graph has %s", m)
			}
		}
	}
}

// repoModules maps the path of every Go module in this repository (its
// go.mod's module line) to its directory, relative to the root.
func repoModules(t *testing.T) map[string]string {
	t.Helper()
	mods := map[string]string{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.Name() != "go.mod" {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		s := bufio.NewScanner(f)
		for s.Scan() {
			if p, ok := strings.CutPrefix(s.Text(), "module "); ok {
				mods[strings.TrimSpace(p)] = filepath.Dir(path)
				break
			}
		}
		return s.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(mods) == 0 || !slices.Contains(mapValues(mods), ".") {
		t.Fatalf("run from the repository's root (found modules %v)", mods)
	}
	return mods
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// goVersion is the go line of a go.mod.
func goVersion(t *testing.T, gomod string) string {
	t.Helper()
	b, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "go "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("%s has no go line", gomod)
	return ""
}
