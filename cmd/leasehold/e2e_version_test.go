package main_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
)

// TestVersionPrintsTheRevision: version and --version show the commit the
// binary was built from, read from its build information. Go stamps that
// only in a repository's main checkout (not a git worktree) and only with
// VCS stamping on, so the test builds a fresh clone of HEAD with
// -buildvcs=true, as go install from a checkout does.
func TestVersionPrintsTheRevision(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a clone of the repository")
	}
	t.Parallel()
	gitOut := func(dir string, args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
		if err != nil {
			t.Skipf("git %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	head := gitOut(".", "rev-parse", "HEAD")
	clone := filepath.Join(t.TempDir(), "src")
	gitOut(".", "clone", "--quiet", "--shared", gitOut(".", "rev-parse", "--show-toplevel"), clone)
	gitOut(clone, "checkout", "--quiet", head)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "leasehold")
	build := exec.CommandContext(ctx, "go", "build", "-buildvcs=true", "-trimpath", "-o", bin, "./cmd/leasehold")
	build.Dir = clone
	build.Env = append(os.Environ(), "GOFLAGS=", "GOPROXY=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in a clone: %v\n%s", err, out)
	}

	run := func(args ...string) string {
		out, err := exec.CommandContext(ctx, bin, args...).Output()
		if err != nil {
			t.Fatalf("leasehold %s: %v", strings.Join(args, " "), err)
		}
		return string(out)
	}
	var v cliout.Version
	if err := decodeStrict(run("version", "--json"), &v); err != nil {
		t.Fatal(err)
	}
	if v.Revision != head || v.Modified || v.Module != "github.com/leasehold/leasehold" || !strings.HasPrefix(v.GoVersion, "go") {
		t.Errorf("version --json: %+v; want revision %s, not modified", v, head)
	}
	if _, err := time.Parse(time.RFC3339, v.Time); err != nil {
		t.Errorf("version --json time %q: want an RFC 3339 time", v.Time)
	}
	line := regexp.MustCompile(`^leasehold \S+ \(` + head + ` \S+\) go\S+\n$`)
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if out := run(args...); !line.MatchString(out) {
			t.Errorf("leasehold %s: %q; want the version, revision %s and its time", strings.Join(args, " "), out, head)
		}
	}
}
