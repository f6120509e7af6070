// Package testcluster is the harness that starts real leasehold nodes for
// tests: raft with its fsync'd log in a temp dir, TCP on loopback, the API
// on a port of its own. Tests that use it live with the package they test,
// and the cross-cutting ones in integration/.
package testcluster

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/embed"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/server"
)

// Node is one in-process node and its API server.
type Node struct {
	Cluster  *cluster.Node
	Server   *server.Server
	Registry *prometheus.Registry
	URL      string // http://127.0.0.1:PORT
	Config   cluster.Config

	listener net.Listener
	embedded *embed.Node
}

// Option adjusts a node's configuration before it starts.
type Option func(*cluster.Config)

// Logger returns a logger for tests: silent unless LEASEHOLD_TEST_LOG is
// set, to a level ("debug", "info", "warn", "error"; anything else means
// debug).
func Logger() *slog.Logger {
	v := os.Getenv("LEASEHOLD_TEST_LOG")
	if v == "" {
		return slog.New(slog.DiscardHandler)
	}
	level := slog.LevelDebug
	level.UnmarshalText([]byte(v))
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// StartNode starts a single-voter node in dir (a new temp dir if empty),
// waits until it leads, and stops it when the test ends.
func StartNode(t testing.TB, dir string, opts ...Option) *Node {
	t.Helper()
	return startNode(t, dir, nil, opts...)
}

func startNode(t testing.TB, dir string, srv func(*server.Config), opts ...Option) *Node {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cfg := cluster.DefaultConfig()
	cfg.DataDir = dir
	cfg.RaftListener = testutil.Listen(t)
	cfg.RaftAddr = cfg.RaftListener.Addr().String()
	cfg.Logger = Logger()
	for _, o := range opts {
		o(&cfg)
	}
	var srvOpts []func(*server.Config)
	if srv != nil {
		srvOpts = append(srvOpts, srv)
	}
	n, err := OpenOn(cfg, testutil.Listen(t), srvOpts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := n.Cluster.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	return n
}

// Open starts a node with cfg and serves its API on apiAddr. It does not
// wait for a leader. The caller stops it.
func Open(cfg cluster.Config, apiAddr string, srvOpts ...func(*server.Config)) (*Node, error) {
	l, err := net.Listen("tcp", apiAddr)
	if err != nil {
		if cfg.RaftListener != nil {
			cfg.RaftListener.Close()
		}
		return nil, err
	}
	return OpenOn(cfg, l, srvOpts...)
}

// OpenOn is Open on an already-bound API listener (which it closes on
// error).
func OpenOn(cfg cluster.Config, l net.Listener, srvOpts ...func(*server.Config)) (*Node, error) {
	scfg := server.Config{AdvertiseURL: "http://" + l.Addr().String()}
	for _, o := range srvOpts {
		o(&scfg)
	}
	en, err := embed.Start(embed.Config{Cluster: cfg, Server: scfg, API: l})
	if err != nil {
		return nil, err
	}
	// n.Config keeps cfg as given (but for the listener, which is spent),
	// so a restart listens on the same address and wires a new registry.
	cfg.RaftListener = nil
	return &Node{Cluster: en.Cluster, Server: en.Server, Registry: en.Registry, URL: en.URL, Config: cfg,
		listener: l, embedded: en}, nil
}

// Stop shuts the node down; it is safe to call twice.
func (n *Node) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n.embedded.Close(ctx)
}

// HTTPClient is a client for the node's API with a sane timeout.
func HTTPClient() *http.Client { return &http.Client{Timeout: 30 * time.Second} }

// Listen and FreeAddr are testutil's, under the names tests used here.
var (
	Listen   = testutil.Listen
	FreeAddr = testutil.FreeAddr
)
