package main_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGoInstallFromCleanModuleCache: `go install ./cmd/leasehold` works on
// a machine that has never built the module: an empty module cache and
// GOBIN, -mod=mod and GOWORK=off (go.mod and go.sum alone must name every
// dependency; the repository's go.work is for development),
// modules fetched from GOPROXY as the user's would be. The installed
// binary answers `leasehold version`. (The README's `go install
// github.com/leasehold/leasehold/cmd/leasehold@latest` takes the same
// path through the published module.) Skipped in -short and with
// GOPROXY=off, where nothing can be fetched.
func TestGoInstallFromCleanModuleCache(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads every dependency into an empty module cache")
	}
	if os.Getenv("GOPROXY") == "off" {
		t.Skip("GOPROXY=off: modules cannot be fetched")
	}
	t.Parallel()
	tmp := t.TempDir()
	modcache, gobin := filepath.Join(tmp, "modcache"), filepath.Join(tmp, "bin")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	install := exec.CommandContext(ctx, "go", "install", "./cmd/leasehold")
	install.Dir = "../.."
	install.Env = append(os.Environ(), "GOMODCACHE="+modcache, "GOBIN="+gobin, "GOFLAGS=-mod=mod", "GOWORK=off", "CGO_ENABLED=0")
	out, err := install.CombinedOutput()
	// The module cache is read-only on disk: make it writable so that
	// TempDir's cleanup can remove it.
	defer func() { exec.Command("chmod", "-R", "u+w", modcache).Run() }()
	if err != nil {
		t.Fatalf("go install ./cmd/leasehold from an empty module cache: %v\n%s", err, out)
	}
	bin := filepath.Join(gobin, "leasehold")
	vout, err := exec.CommandContext(ctx, bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(vout), "leasehold ") {
		t.Fatalf("%s version: %v\n%s", bin, err, vout)
	}
	t.Logf("installed: %s", strings.TrimSpace(string(vout)))
}
