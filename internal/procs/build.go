package procs

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// buildTimeout is roomy: a cold race build on two shared cores is slow.
const buildTimeout = 4 * time.Minute

// Build builds the leasehold command (with -race if this test binary has
// it) into a fresh temporary directory, named by prefix. remove deletes
// that directory; call it after m.Run.
func Build(prefix string) (bin string, remove func(), err error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	bin = filepath.Join(dir, "leasehold")
	if err := BuildPackage(bin, "github.com/leasehold/leasehold/cmd/leasehold"); err != nil {
		remove()
		return "", nil, err
	}
	return bin, remove, nil
}

// BuildPackage builds the command pkg (an import path, or a directory
// relative to the test's) into out, with -race if this test binary has it.
func BuildPackage(out, pkg string) error {
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	args := []string{"build", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, pkg)
	if b, err := exec.CommandContext(ctx, goTool(), args...).CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return nil
}

// RaceEnabled says whether Build builds with -race.
func RaceEnabled() bool { return raceEnabled }

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}
