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
