package embed_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/embed"
)

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func config(t *testing.T, dir string) embed.Config {
	cfg := cluster.DefaultConfig()
	cfg.DataDir = dir
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.RaftListener = listen(t)
	cfg.RaftAddr = cfg.RaftListener.Addr().String()
	return embed.Config{Cluster: cfg, API: listen(t)}
}

// A node started on listeners bound to port 0 leads and serves on them;
// Close releases them and the data dir, so the same dir opens again.
func TestStartOnBoundListeners(t *testing.T) {
	dir := t.TempDir()
	for run := range 2 {
		cfg := config(t, dir)
		n, err := embed.Start(cfg)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		if err := n.Cluster.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		if n.URL != "http://"+cfg.API.Addr().String() {
			t.Errorf("URL %s, want the API listener's", n.URL)
		}
		r, err := http.Get(n.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusOK {
			t.Errorf("/readyz: %d", r.StatusCode)
		}
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		if err := n.Close(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := n.Close(context.Background()); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if c, err := net.Dial("tcp", cfg.API.Addr().String()); err == nil {
			c.Close()
			t.Errorf("run %d: the API listener still accepts after Close", run)
		}
	}
}

// A node that fails to open closes the listeners it was given: the caller
// handed them over.
func TestStartFailureClosesListeners(t *testing.T) {
	cfg := config(t, "") // no data dir: the node refuses to open
	if _, err := embed.Start(cfg); err == nil {
		t.Fatal("started without a data dir")
	}
	for name, l := range map[string]net.Listener{"api": cfg.API, "raft": cfg.Cluster.RaftListener} {
		l.(*net.TCPListener).SetDeadline(time.Now().Add(5 * time.Second)) // fail, not hang
		if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("%s listener: Accept = %v, want it closed", name, err)
		}
	}
}

// With NoDashboard the node serves its API and probes but no dashboard:
// /ui/ answers 404 (with it, the login page).
func TestNoDashboard(t *testing.T) {
	for _, off := range []bool{false, true} {
		cfg := config(t, t.TempDir())
		cfg.NoDashboard = off
		n, err := embed.Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		if err := n.Cluster.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		status := func(path string) int {
			t.Helper()
			r, err := http.Get(n.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			r.Body.Close()
			return r.StatusCode
		}
		ui, ready := status("/ui/"), status("/readyz")
		if want := map[bool]int{false: http.StatusOK, true: http.StatusNotFound}[off]; ui != want || ready != http.StatusOK {
			t.Errorf("NoDashboard %v: /ui/ answered %d (want %d), /readyz %d (want 200)", off, ui, want, ready)
		}
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		if err := n.Close(ctx); err != nil {
			t.Error(err)
		}
		cancel()
	}
}
