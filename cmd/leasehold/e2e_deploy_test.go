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

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// TestSystemdUnitVerifies: deploy/leasehold.service passes
// `systemd-analyze verify` without a warning (it prints unknown or
// malformed settings and still exits 0, so any output fails), with the
// built binary in place of /usr/local/bin/leasehold, and keeps its
// hardening settings.
func TestSystemdUnitVerifies(t *testing.T) {
	t.Parallel()
	unit, err := os.ReadFile("../../deploy/leasehold.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"DynamicUser=yes", "StateDirectory=leasehold", "NoNewPrivileges=yes",
		"ProtectSystem=strict", "ProtectHome=yes", "Restart=on-failure", "CapabilityBoundingSet=\n",
		"ExecStart=/usr/local/bin/leasehold serve --data-dir ${STATE_DIRECTORY}"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("deploy/leasehold.service lacks %q", want)
		}
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze on this machine")
	}
	local := filepath.Join(t.TempDir(), "leasehold.service")
	abs, err := filepath.Abs(lhBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(local, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/leasehold", abs)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, "verify", local).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify deploy/leasehold.service: %v\n%s", err, out)
	}
}

// TestDockerfileInvariants checks deploy/Dockerfile as text (no image is
// built here): a static binary from a build stage, an unprivileged user,
// the /data volume as the data dir, and a health check by the binary.
func TestDockerfileInvariants(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../deploy/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	stages := regexp.MustCompile(`(?m)^FROM `).FindAllString(df, -1)
	if len(stages) < 2 {
		t.Errorf("want a multi-stage build, found %d FROM lines", len(stages))
	}
	user := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindAllStringSubmatch(df, -1)
	if len(user) == 0 {
		t.Error("no USER: the container would run as root")
	}
	for _, u := range user {
		if name, _, _ := strings.Cut(u[1], ":"); name == "root" || name == "0" {
			t.Errorf("USER %s is root", u[1])
		}
	}
	for _, re := range []string{
		`CGO_ENABLED=0 go build`,
		`(?m)^VOLUME \["/data"\]`,
		`LEASEHOLD_DATA_DIR=/data`,
		`(?m)^HEALTHCHECK .*\n?.*CMD \["/usr/local/bin/leasehold", "health"`,
	} {
		if !regexp.MustCompile(re).MatchString(df) {
			t.Errorf("deploy/Dockerfile does not match %s", re)
		}
	}
}

// TestDockerfileCopiesTheModulesTheNodeRequires: every module the root's
// go.mod replaces by a directory of this repository (the client-side
// modules) has its go.mod copied before the build stage's go mod download,
// which cannot resolve the module graph without it.
func TestDockerfileCopiesTheModulesTheNodeRequires(t *testing.T) {
	t.Parallel()
	df, err := os.ReadFile("../../deploy/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	before, _, ok := strings.Cut(string(df), "go mod download")
	if !ok {
		t.Fatal("deploy/Dockerfile runs no go mod download")
	}
	dirs := regexp.MustCompile(`(?m)^\s*(?:replace\s+)?\S+\s+=>\s+\./(\S+)\s*$`).FindAllStringSubmatch(string(gomod), -1)
	if len(dirs) == 0 {
		t.Fatal("go.mod replaces no module by a directory of the repository")
	}
	for _, d := range dirs {
		want := regexp.MustCompile(`(?m)^COPY .*\b` + regexp.QuoteMeta(d[1]+"/go.mod") + `\b`)
		if !want.MatchString(before) {
			t.Errorf("deploy/Dockerfile does not COPY %s/go.mod before go mod download", d[1])
		}
	}
}

// TestDockerignoreCoversGitignore: the build context leaves out .git and
// everything .gitignore ignores (data dirs, binaries, node_modules), as
// Docker reads .dockerignore (moby/patternmatcher, its own matcher), and
// keeps the sources the build needs. Each .gitignore pattern is tried on
// paths git itself ignores by it, at the top and deeper down.
func TestDockerignoreCoversGitignore(t *testing.T) {
	t.Parallel()
	f, err := os.Open("../../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	excluded := func(path string) bool {
		ok, err := pm.MatchesOrParentMatches(path)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	gitignore, err := os.ReadFile("../../.gitignore")
	if err != nil {
		t.Fatal(err)
	}
	samples := []string{".git/HEAD", "ui/node_modules/x/index.js"}
	for _, line := range strings.Split(string(gitignore), "\n") {
		p := strings.TrimSpace(line)
		if p == "" || strings.HasPrefix(p, "#") || strings.HasPrefix(p, "!") {
			continue
		}
		anchored := strings.HasPrefix(p, "/") || strings.Contains(strings.Trim(p, "/"), "/")
		p = strings.NewReplacer("**/", "a/", "*", "x").Replace(strings.TrimPrefix(p, "/"))
		if strings.HasSuffix(p, "/") {
			p += "f"
		}
		samples = append(samples, p)
		if !anchored {
			samples = append(samples, "sub/dir/"+p)
		}
	}
	for _, s := range samples[2:] { // the oracle: git ignores each sample
		if err := exec.Command("git", "-C", "../..", "check-ignore", "--no-index", "-q", s).Run(); err != nil {
			t.Errorf("git does not ignore %s, the sample of a .gitignore line: the test's reading of .gitignore is wrong (%v)", s, err)
		}
	}
	for _, s := range samples {
		if !excluded(s) {
			t.Errorf(".dockerignore does not leave out %s", s)
		}
	}
	for _, s := range []string{"go.mod", "go.sum", "cmd/leasehold/main.go", "server/server.go", "ui/audit.go"} {
		if excluded(s) {
			t.Errorf(".dockerignore leaves out %s, which the build needs", s)
		}
	}
}

// TestDockerfileRunsOnLoopback: the Dockerfile's run line publishes the
// unauthenticated node's port on loopback only, and it says what to set
// for a node others reach.
func TestDockerfileRunsOnLoopback(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../deploy/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	runs := regexp.MustCompile(`(?m)^#.*docker run .*$`).FindAllString(df, -1)
	if len(runs) == 0 {
		t.Fatal("the Dockerfile shows no docker run line")
	}
	publish := regexp.MustCompile(`(?:-p|--publish)[ =](\S+)`)
	for _, run := range runs {
		for _, m := range publish.FindAllStringSubmatch(run, -1) {
			if host, _, ok := strings.Cut(m[1], ":"); !ok || host != "127.0.0.1" || strings.Count(m[1], ":") != 2 {
				t.Errorf("%q publishes %s: want 127.0.0.1:HOSTPORT:7420, the node has no auth", strings.TrimSpace(run), m[1])
			}
		}
	}
	for _, want := range []string{"LEASEHOLD_AUTH_FILE", "LEASEHOLD_INSECURE=false"} {
		if !regexp.MustCompile(`(?m)^#.*` + want).MatchString(df) {
			t.Errorf("the Dockerfile's comments do not say to set %s for a node others reach", want)
		}
	}
}
