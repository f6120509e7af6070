package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/server"
)

type serveFlags struct {
	dataDir   string
	apiAddr   string
	raftAddr  string
	nodeID    string
	logLevel  string
	logFormat string
}

func newServe() *cobra.Command {
	f := &serveFlags{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a leasehold node (an embedded single node unless told otherwise)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return serve(cmd.Context(), f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", "./leasehold-data", "directory for the raft log and snapshots")
	fl.StringVar(&f.apiAddr, "api-addr", "127.0.0.1:7420", "address for the API, /metrics, /healthz and /readyz")
	fl.StringVar(&f.raftAddr, "raft-addr", "127.0.0.1:7421", "address for raft traffic between nodes")
	fl.StringVar(&f.nodeID, "node-id", "n1", "this node's id in the cluster")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&f.logFormat, "log-format", "text", "text or json")
	return cmd
}

func newLogger(level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use text or json", format)
}

func serve(ctx context.Context, f *serveFlags) error {
	log, err := newLogger(f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	cfg := cluster.DefaultConfig()
	cfg.NodeID = f.nodeID
	cfg.DataDir = f.dataDir
	cfg.RaftAddr = f.raftAddr
	cfg.Logger = log

	// Listen before opening the node so a taken port fails fast.
	l, err := net.Listen("tcp", f.apiAddr)
	if err != nil {
		return fmt.Errorf("listen on --api-addr %s: %w", f.apiAddr, err)
	}
	defer l.Close()

	reg := prometheus.NewRegistry()
	metrics := server.NewMetrics(reg)
	node, err := cluster.Open(cfg, metrics)
	if err != nil {
		return err
	}
	defer node.Close()
	srv, err := server.New(server.Config{Node: node, Logger: log, Registry: reg, Metrics: metrics})
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	log.Info("leasehold serving", "api", "http://"+l.Addr().String(), "raft", f.raftAddr, "data_dir", f.dataDir, "node_id", f.nodeID)

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("requests still in flight were cut off", "err", err)
	}
	if err := node.Close(); err != nil {
		return fmt.Errorf("close node: %w", err)
	}
	log.Info("stopped")
	return nil
}
