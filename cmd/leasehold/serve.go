package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/server"
)

type serveFlags struct {
	peers     string
	join      string
	advertise string
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
	fl.StringVar(&f.peers, "peers", "", "bootstrap a new cluster of these voters: ID=RAFTADDR,... (include this node)")
	fl.StringVar(&f.join, "join", "", "join a running cluster through this node's API URL (http://HOST:PORT)")
	fl.StringVar(&f.advertise, "advertise", "", "raft address other nodes dial to reach this one (default --raft-addr)")
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
	cfg.Advertise = f.advertise
	cfg.Logger = log
	cfg.Join = f.join != ""
	if cfg.Peers, err = parsePeers(f.peers); err != nil {
		return err
	}

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
	srv, err := server.New(server.Config{Node: node, NodeID: f.nodeID, Logger: log, Registry: reg, Metrics: metrics})
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	log.Info("leasehold serving", "api", "http://"+l.Addr().String(), "raft", f.raftAddr, "data_dir", f.dataDir, "node_id", f.nodeID)
	if cfg.Join {
		adv := f.advertise
		if adv == "" {
			adv = f.raftAddr
		}
		go join(ctx, log, f.join, f.nodeID, adv)
	}

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

// parsePeers reads ID=HOST:PORT,... into peers.
func parsePeers(s string) ([]cluster.Peer, error) {
	if s == "" {
		return nil, nil
	}
	var peers []cluster.Peer
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("--peers: %q is not ID=HOST:PORT", item)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("--peers: %q: %v", item, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("--peers: node id %q appears twice", id)
		}
		seen[id] = true
		peers = append(peers, cluster.Peer{ID: id, Addr: addr})
	}
	return peers, nil
}

// join asks a running cluster to add this node as a voter, retrying until
// it is a member or ctx ends. A node that is already a member (a restart)
// is added again harmlessly.
func join(ctx context.Context, log *slog.Logger, url, id, raftAddr string) {
	c := leaseholdv1connect.NewClusterClient(http.DefaultClient, strings.TrimRight(url, "/"))
	for attempt := 0; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 35*time.Second)
		_, err := c.AddVoter(cctx, connect.NewRequest(&pb.AddVoterRequest{Id: id, RaftAddr: raftAddr}))
		cancel()
		if err == nil {
			log.Info("joined the cluster", "via", url)
			return
		}
		log.Warn("could not join yet; retrying", "via", url, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(time.Duration(attempt+1)*500*time.Millisecond, 5*time.Second)):
		}
	}
}
