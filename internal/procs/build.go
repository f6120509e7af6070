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
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "github.com/leasehold/leasehold/cmd/leasehold")
	if out, err := exec.CommandContext(ctx, goTool(), args...).CombinedOutput(); err != nil {
		remove()
		return "", nil, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin, remove, nil
}

// RaceEnabled says whether Build builds with -race.
func RaceEnabled() bool { return raceEnabled }

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}
