package client_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestClientImportsNoServerSide keeps the client light: it imports the
// domain types and the generated API, never raft or the server side, nor
// a metrics or tracing library.
func TestClientImportsNoServerSide(t *testing.T) {
	t.Parallel()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Skip("no go command to list dependencies with")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, goBin, "list", "-deps", "github.com/leasehold/leasehold/client").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	forbidden := []string{
		"github.com/hashicorp/",
		"github.com/leasehold/leasehold/server",
		"github.com/leasehold/leasehold/cluster",
		"github.com/leasehold/leasehold/fsm",
		"github.com/leasehold/leasehold/internal/",
		"github.com/leasehold/leasehold/fence",
		// Counting and tracing are the caller's choice (Config.Metrics,
		// Config.Tracing): clientprom and clientotel bring the libraries.
		"github.com/prometheus/",
		"go.opentelemetry.io/",
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("the client depends on %s", dep)
			}
		}
	}
}
