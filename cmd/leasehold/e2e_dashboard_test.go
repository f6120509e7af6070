package main_test

import (
	"net/http"
	"path/filepath"
	"testing"

	"github.com/leasehold/leasehold/internal/procs"
)

// serve --dashboard=false leaves the dashboard out: /ui/ answers 404
// while the API's probes answer as ever.
func TestServeDashboardOff(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	api := freeAddr(t)
	p := startProc(t, dir, "serve-nodash", childEnv(), "serve", "--api-addr", api, "--raft-addr", freeAddr(t),
		"--data-dir", filepath.Join(dir, "data"), "--dashboard=false")
	if err := procs.WaitReady(p, "http://"+api, readyTimeout); err != nil {
		t.Fatal(err)
	}
	r, err := http.Get("http://" + api + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusNotFound {
		t.Fatalf("/ui/ with --dashboard=false answered %d, want 404", r.StatusCode)
	}
}
