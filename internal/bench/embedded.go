package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/internal/freeport"
	"github.com/leasehold/leasehold/server"
)

// Embedded is an in-process single-voter node with its API on a loopback
// port: the same raft, fsync'd log and server as `leasehold serve`.
type Embedded struct {
	URL  string // http://127.0.0.1:PORT
	Node *cluster.Node

	srv     *server.Server
	dir     string
	ownsDir bool
	served  chan error
}

// EmbeddedOptions adjust an embedded node.
type EmbeddedOptions struct {
	// Dir holds the raft log and snapshots; a new temp dir (removed by
	// Close) if empty.
	Dir    string
	Logger *slog.Logger // silent if nil
	// Tune, if set, adjusts the cluster configuration before the node
	// opens (batching, timeouts).
	Tune func(*cluster.Config)
}

// StartEmbedded starts a node and waits until it leads.
func StartEmbedded(ctx context.Context, o EmbeddedOptions) (*Embedded, error) {
	e := &Embedded{dir: o.Dir, served: make(chan error, 1)}
	if e.dir == "" {
		d, err := os.MkdirTemp("", "leasehold-bench-")
		if err != nil {
			return nil, err
		}
		e.dir, e.ownsDir = d, true
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg := cluster.DefaultConfig()
	cfg.DataDir = e.dir
	cfg.Logger = log
	if o.Tune != nil {
		o.Tune(&cfg)
	}
	reg := prometheus.NewRegistry()
	metrics := server.NewMetrics(reg)
	// The raft transport needs a port of its own; one that was free a
	// moment ago may be taken by the time it binds, so try a few.
	var err error
	for range 5 {
		cfg.RaftAddr, err = freeport.Addr()
		if err != nil {
			break
		}
		e.Node, err = cluster.Open(cfg, metrics)
		if err == nil {
			break
		}
	}
	if err != nil {
		e.removeDir()
		return nil, fmt.Errorf("embedded node: %w", err)
	}
	e.srv, err = server.New(server.Config{Node: e.Node, Logger: log, Registry: reg, Metrics: metrics})
	if err != nil {
		e.Node.Close()
		e.removeDir()
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.Node.Close()
		e.removeDir()
		return nil, err
	}
	e.URL = "http://" + l.Addr().String()
	go func() { e.served <- e.srv.Serve(l) }()
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := e.Node.WaitLeader(wctx); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Dir is the node's data directory.
func (e *Embedded) Dir() string { return e.dir }

// Close stops the server and the node and removes a temp data dir.
//
// The server is shut down first, but the node is closed even if that has
// not finished within a second: a server that also serves on a listener
// the node owns only finishes its shutdown once the node is closed.
func (e *Embedded) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- e.srv.Shutdown(ctx) }()
	var err error
	select {
	case err = <-shut:
		err = errors.Join(err, e.Node.Close())
	case <-time.After(time.Second):
		err = e.Node.Close()
		select {
		case serr := <-shut:
			err = errors.Join(err, serr)
		case <-ctx.Done():
		}
	}
	e.removeDir()
	return err
}

func (e *Embedded) removeDir() {
	if e.ownsDir {
		os.RemoveAll(e.dir)
	}
}
