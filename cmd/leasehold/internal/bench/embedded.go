package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/embed"
)

// Embedded is an in-process single-voter node with its API on a loopback
// port: the same raft, fsync'd log and server as `leasehold serve`.
type Embedded struct {
	URL  string // http://127.0.0.1:PORT
	Node *cluster.Node

	node    *embed.Node
	dir     string
	ownsDir bool
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
	e := &Embedded{dir: o.Dir}
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
	// Listen on port 0 before opening: no port to guess and retry.
	raft, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.removeDir()
		return nil, err
	}
	cfg.RaftListener, cfg.RaftAddr = raft, raft.Addr().String()
	api, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		raft.Close()
		e.removeDir()
		return nil, err
	}
	n, err := embed.Start(embed.Config{Cluster: cfg, API: api})
	if err != nil {
		e.removeDir()
		return nil, fmt.Errorf("embedded node: %w", err)
	}
	e.node, e.Node, e.URL = n, n.Cluster, n.URL
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
func (e *Embedded) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err := e.node.Close(ctx)
	e.removeDir()
	return err
}

func (e *Embedded) removeDir() {
	if e.ownsDir {
		os.RemoveAll(e.dir)
	}
}
