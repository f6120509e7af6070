package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/embed"
	"github.com/leasehold/leasehold/internal/gctarget"
	"github.com/leasehold/leasehold/server"
	"github.com/leasehold/leasehold/service"
)

type serveFlags struct {
	authFile                                 string
	insecure, dashboard                      bool
	acquireRate                              float64
	tlsCert, tlsKey, tlsClientCA             string
	raftTLSCert, raftTLSKey, raftTLSCA       string
	raftTLSServerName                        string
	maxWaitersPerResource, maxLeasesPerOwner int
	walSegmentMiB                            int
	watchHistory                             int
	gcPercent                                int
	peers                                    string
	join                                     string
	advertise                                string
	apiURL                                   string
	dataDir                                  string
	apiAddr                                  string
	raftAddr                                 string
	nodeID                                   string
	logLevel                                 string
	logFormat                                string
	metricsAddr                              string
	metricsAuth                              bool
	allowHosts                               []string
	otlpEndpoint                             string
	limits                                   requestLimits
	cpuprofile                               string
	clockRate                                float64 // test only: run the node's clock at this rate
	maxConnsSet                              bool    // --max-conns was given
}

// requestLimits bound what clients may cost a node (see server.Config).
type requestLimits struct {
	maxRequestBytes             int
	maxInflightBodyBytes        int64
	bodyTimeout                 time.Duration
	maxConns, maxConnsPerClient int
	maxQueueBodyBytes           int
}

func newServe(g *globals) *cobra.Command {
	f := &serveFlags{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a leasehold node (an embedded single node unless told otherwise)",
		Long: "Run a leasehold node (an embedded single node unless told otherwise).\n\n" +
			"Every flag can also be set by an environment variable: LEASEHOLD_ and the flag's name\n" +
			"in upper case with underscores (--data-dir is LEASEHOLD_DATA_DIR). A flag on the\n" +
			"command line wins over its variable.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := flagsFromEnv(cmd); err != nil {
				return err
			}
			f.maxConnsSet = cmd.Flags().Changed("max-conns")
			return serve(cmd.Context(), g, f, cmd.Flags().Changed("metrics-auth"))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", "./leasehold-data", "directory for the raft log and snapshots")
	fl.StringVar(&f.apiAddr, "api-addr", "127.0.0.1:7420", "address for the API, /metrics, /healthz and /readyz")
	fl.StringVar(&f.raftAddr, "raft-addr", "127.0.0.1:7421", "address for raft traffic between nodes")
	fl.StringVar(&f.nodeID, "node-id", "n1", "this node's id in the cluster")
	fl.StringVar(&f.peers, "peers", "", "bootstrap a new cluster of these voters: ID=RAFTADDR,... (include this node)")
	fl.StringVar(&f.join, "join", "", "join a running cluster through this node's API URL (http://HOST:PORT)")
	fl.StringVar(&f.advertise, "advertise", "", "raft address other nodes dial to reach this one (default --raft-addr)")
	fl.StringVar(&f.apiURL, "advertise-api", "", "API URL clients use for this node, sent to them while it leads (default from --api-addr)")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&f.logFormat, "log-format", "text", "text or json")
	fl.StringVar(&f.authFile, "auth-file", "", "JSON file of bearer tokens (hashed) and their roles; see 'leasehold auth token'")
	fl.BoolVar(&f.insecure, "insecure", false, "allow a non-loopback address without auth and raft TLS")
	fl.BoolVar(&f.dashboard, "dashboard", true, "serve the web dashboard at /ui/ (--dashboard=false: /ui/ answers 404)")
	fl.Float64Var(&f.acquireRate, "acquire-rate", 2000, "most acquisitions a second per client (0: no limit)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "serve the API over TLS with this certificate (PEM)")
	fl.StringVar(&f.tlsKey, "tls-key", "", "the API certificate's key (PEM)")
	fl.StringVar(&f.tlsClientCA, "tls-client-ca", "", "require API clients to show a certificate from this CA (mTLS)")
	fl.StringVar(&f.raftTLSCert, "raft-tls-cert", "", "this node's certificate for mutual TLS between nodes")
	fl.StringVar(&f.raftTLSKey, "raft-tls-key", "", "its key")
	fl.StringVar(&f.raftTLSCA, "raft-tls-ca", "", "the CA that signs every node's certificate")
	fl.StringVar(&f.raftTLSServerName, "raft-tls-server-name", "", "check every other node's certificate for this name, "+
		"instead of the host dialed: a name all nodes' certificates carry, for nodes that reach each other by changing IPs "+
		"(a follower dials its leader at the IP the leader advertises), as in Kubernetes (deploy/kubernetes)")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve /metrics on this address instead of --api-addr")
	fl.BoolVar(&f.metricsAuth, "metrics-auth", false, "require an operator or admin token without prefixes for /metrics "+
		"(default: on when --auth-file is given; --metrics-auth=false opens it)")
	fl.StringSliceVar(&f.allowHosts, "allow-host", nil, "a name clients reach this node by, besides localhost, IP addresses "+
		"and the --advertise-api host (repeatable or comma-separated): without --auth-file any other Host is refused "+
		"(421), and with it the dashboard refuses it")
	fl.IntVar(&f.limits.maxRequestBytes, "max-request-bytes", server.DefaultMaxRequestBytes,
		"refuse a request body larger than this (the default holds the largest valid batch; -1: no limit)")
	fl.Int64Var(&f.limits.maxInflightBodyBytes, "max-inflight-body-bytes", server.DefaultMaxInflightBodyBytes,
		"refuse a request when the bodies of all requests in flight would hold more bytes than this (-1: no limit)")
	durationVar(fl, &f.limits.bodyTimeout, "body-timeout", server.DefaultBodyTimeout,
		"refuse a request whose body takes longer than this to arrive (a waiting acquire's wait is not counted)")
	fl.IntVar(&f.limits.maxConns, "max-conns", server.DefaultMaxConns, "most API connections open at once (-1: no limit)")
	fl.IntVar(&f.limits.maxConnsPerClient, "max-conns-per-client", server.DefaultMaxConnsPerClient,
		"most API connections open at once from one IP address (-1: no limit)")
	fl.IntVar(&f.limits.maxQueueBodyBytes, "max-queue-body-bytes", server.DefaultMaxQueueBodyBytes,
		fmt.Sprintf("refuse a queue message whose body is larger than this (1 to %d)", leasehold.MaxQueueBody))
	fl.IntVar(&f.maxWaitersPerResource, "max-waiters-per-resource", 1000, "refuse to queue more waiters on one resource (same on every node)")
	fl.IntVar(&f.maxLeasesPerOwner, "max-leases-per-owner", 100000, "refuse more leases to one owner (same on every node)")
	fl.IntVar(&f.walSegmentMiB, "wal-segment-size", cluster.DefaultConfig().WALSegmentSize>>20,
		"size in MiB of one raft log segment file; each is preallocated in full, so the data dir needs this much free space to start and to go on")
	fl.StringVar(&f.otlpEndpoint, "otlp-endpoint", "", "export OpenTelemetry traces to this OTLP/HTTP collector URL "+
		"(default: none, or OTEL_EXPORTER_OTLP_ENDPOINT if set)")
	fl.StringVar(&f.cpuprofile, "cpuprofile", "", "write a CPU profile of the node until it stops")
	fl.MarkHidden("cpuprofile")
	fl.Float64Var(&f.clockRate, "test-clock-rate", 1, "test only: the node's clock (lease countdowns, timers) runs at this rate times real time")
	fl.MarkHidden("test-clock-rate")
	fl.IntVar(&f.watchHistory, "watch-history", service.DefaultHubConfig().Events,
		"change events this node keeps for watches to resume from (1000 to 10000000; about 100 bytes each, 160 for a KV or group event, plus keys and values, 64 MiB of those at most)")
	fl.IntVar(&f.gcPercent, "gc-percent", gctarget.Percent,
		"let the heap grow this much (percent) above what is live before collecting, once 16 MiB is less than that "+
			"(10 to 100; 100 is Go's default; ignored if GOGC is set)")
	return cmd
}

func newLogger(level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, usagef("--log-format %q: use text or json", format)
}

// serve runs a node; metricsAuthSet says --metrics-auth was given (else
// its default depends on the other flags).
func serve(ctx context.Context, g *globals, f *serveFlags, metricsAuthSet bool) error {
	log, err := newLogger(f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	if f.cpuprofile != "" {
		stop, err := startCPUProfile(f.cpuprofile)
		if err != nil {
			return err
		}
		defer stop()
	}
	cfg := cluster.DefaultConfig()
	cfg.NodeID = f.nodeID
	cfg.DataDir = f.dataDir
	cfg.RaftAddr = f.raftAddr
	cfg.Advertise = f.advertise
	cfg.Logger = log
	if f.clockRate != 1 {
		if f.clockRate < 0.5 || f.clockRate > 2 {
			return usagef("--test-clock-rate is %v; it must be 0.5 to 2", f.clockRate)
		}
		skewed := clock.NewSkewed()
		skewed.SetRate(f.clockRate)
		cfg.Clock = skewed
	}
	tp, err := tracerProvider(ctx, f.otlpEndpoint, f.nodeID)
	if err != nil {
		return err
	}
	if tp != nil {
		cfg.TracerProvider = tp // the API's spans too (see embed)
		defer func() {
			// Send the spans still batched.
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := tp.Shutdown(sctx); err != nil {
				log.Warn("could not send the last traces", "err", err)
			}
		}()
	}
	cfg.Join = f.join != ""
	if cfg.Peers, err = parsePeers(f.peers); err != nil {
		return err
	}
	if f.walSegmentMiB < 1 || f.walSegmentMiB > maxWALSegmentMiB {
		return usagef("--wal-segment-size %d: give 1 to %d (MiB)", f.walSegmentMiB, maxWALSegmentMiB)
	}
	cfg.WALSegmentSize = f.walSegmentMiB << 20
	if f.watchHistory < 1000 || f.watchHistory > 10_000_000 {
		return usagef("--watch-history %d: give 1000 to 10000000 (events)", f.watchHistory)
	}
	if f.gcPercent < 10 || f.gcPercent > 100 {
		return usagef("--gc-percent %d: give 10 to 100 (100 is Go's default)", f.gcPercent)
	}
	if os.Getenv("GOGC") == "" {
		gctx, stop := context.WithCancel(ctx)
		defer stop()
		go gctarget.Run(gctx, f.gcPercent, time.Second)
	}
	if b := f.limits.maxQueueBodyBytes; b < 1 || b > leasehold.MaxQueueBody {
		return usagef("--max-queue-body-bytes %d: give 1 to %d (1 MiB, the most a message may hold)", b, leasehold.MaxQueueBody)
	}
	cfg.FSM.MaxWaitersPerResource = f.maxWaitersPerResource
	cfg.FSM.MaxLeasesPerOwner = f.maxLeasesPerOwner
	if cfg.TLS, err = raftTLS(f.raftTLSCert, f.raftTLSKey, f.raftTLSCA, f.raftTLSServerName); err != nil {
		return err
	}
	apiTLSCfg, err := apiTLS(f.tlsCert, f.tlsKey, f.tlsClientCA)
	if err != nil {
		return err
	}
	var auth *server.Authenticator
	if f.authFile != "" {
		if auth, err = server.LoadAuthFile(f.authFile); err != nil {
			return err
		}
	}
	// Secure by default: off loopback, demand auth (and raft TLS) unless
	// the operator says --insecure.
	if !f.insecure && !loopback(f.apiAddr) && auth == nil {
		return usagef("--api-addr %s is not a loopback address: give --auth-file (or --insecure to serve without auth)", f.apiAddr)
	}
	if !f.insecure && !loopback(f.raftAddr) && cfg.TLS == nil {
		return usagef("--raft-addr %s is not a loopback address: give --raft-tls-cert/key/ca (or --insecure)", f.raftAddr)
	}

	metricsAuth, err := metricsAuthFor(f, metricsAuthSet, auth != nil)
	if err != nil {
		return err
	}
	if err := checkAllowHosts(f.allowHosts); err != nil {
		return err
	}

	if nofile, ok := openFileLimit(); ok {
		var over bool
		if f.limits.maxConns, over = connsWithin(f.limits.maxConns, f.maxConnsSet, nofile); over {
			log.Warn("--max-conns leaves fewer open files than the node needs for itself; raise the limit (ulimit -n)",
				"max_conns", f.limits.maxConns, "open_file_limit", nofile, "reserved", reservedFiles)
		}
	}

	// Listen before opening the node so a taken port fails fast.
	l, err := net.Listen("tcp", f.apiAddr)
	if err != nil {
		return fmt.Errorf("listen on --api-addr %s: %w", f.apiAddr, err)
	}
	defer l.Close()
	var ml net.Listener
	if f.metricsAddr != "" {
		if ml, err = net.Listen("tcp", f.metricsAddr); err != nil {
			return fmt.Errorf("listen on --metrics-addr %s: %w", f.metricsAddr, err)
		}
		defer ml.Close()
	}

	scheme := "http://"
	if apiTLSCfg != nil {
		scheme = "https://"
	}
	apiURL := f.apiURL
	if host, _, _ := net.SplitHostPort(l.Addr().String()); apiURL == "" && !net.ParseIP(host).IsUnspecified() {
		apiURL = scheme + l.Addr().String()
	}
	node, err := embed.Start(embed.Config{Cluster: cfg, API: l, Metrics: ml, History: service.HubConfig{Events: f.watchHistory},
		NoDashboard: !f.dashboard, Server: server.Config{
			NodeID: f.nodeID, AdvertiseURL: apiURL, Logger: log, Auth: auth, AcquireRate: f.acquireRate, TLS: apiTLSCfg,
			MetricsAuth: metricsAuth, AllowHosts: f.allowHosts,
			MaxRequestBytes: f.limits.maxRequestBytes, MaxInflightBodyBytes: f.limits.maxInflightBodyBytes,
			BodyTimeout: f.limits.bodyTimeout, MaxConns: f.limits.maxConns, MaxConnsPerClient: f.limits.maxConnsPerClient,
			MaxQueueBodyBytes: f.limits.maxQueueBodyBytes}})
	if errors.Is(err, cluster.ErrDiskFull) {
		return fmt.Errorf("%w\nfree space in %s, or start with a smaller --wal-segment-size (now %d MiB)", err, f.dataDir, f.walSegmentMiB)
	}
	if err != nil {
		return err
	}
	defer func() {
		// Close after a failure to serve; after a signal, the Close below
		// has done it already.
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		node.Close(cctx)
	}()
	metricsAt := node.URL + "/metrics"
	if ml != nil {
		metricsAt = "http://" + ml.Addr().String() + "/metrics"
	}
	log.Info("leasehold serving", "api", node.URL, "auth", auth != nil, "raft_tls", cfg.TLS != nil, "raft", f.raftAddr, "data_dir", f.dataDir, "node_id", f.nodeID,
		"metrics", metricsAt, "metrics_auth", metricsAuth, "tracing", tp != nil)
	if cfg.Join {
		adv := f.advertise
		if adv == "" {
			adv = f.raftAddr
		}
		jg := &globals{endpoints: f.join, authToken: g.authToken, tokenFile: g.tokenFile, caFile: g.caFile, certFile: g.certFile, keyFile: g.keyFile}
		c, err := jg.client()
		if err != nil {
			return err
		}
		go join(ctx, log, c, f.join, f.nodeID, adv)
	}

	var fault error
	select {
	case err := <-node.Served():
		return err
	case <-ctx.Done():
	case <-node.Cluster.Failed():
		// The node cannot serve again in this process: exit non-zero so a
		// supervisor restarts it; the restart reopens the log at its last
		// durable entry.
		fault = node.Cluster.Fault()
		log.Error("the node stopped; exiting", "err", fault)
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if fault != nil {
		node.Close(sctx) // its errors follow from the fault
		return faultExit(fault, f.dataDir)
	}
	if err := node.Close(sctx); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// maxWALSegmentMiB keeps a segment under raft-wal's 2 GiB file limit.
const maxWALSegmentMiB = 1024

// faultExit is serve's error after the node stopped on a failed log write.
func faultExit(fault error, dataDir string) error {
	if errors.Is(fault, cluster.ErrDiskFull) {
		return fmt.Errorf("node stopped: %w\nfree space in %s and start it again: it resumes from its last durable log entry", fault, dataDir)
	}
	return fmt.Errorf("node stopped: %w\nfix the cause and start it again: it resumes from its last durable log entry", fault)
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
			return nil, usagef("--peers: %q is not ID=HOST:PORT", item)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, usagef("--peers: %q: %v", item, err)
		}
		if seen[id] {
			return nil, usagef("--peers: node id %q appears twice", id)
		}
		seen[id] = true
		peers = append(peers, cluster.Peer{ID: id, Addr: addr})
	}
	return peers, nil
}

// join asks a running cluster to add this node as a voter, retrying until
// it is a member or ctx ends. A node that is already a member (a restart)
// is added again harmlessly.
func join(ctx context.Context, log *slog.Logger, c *client.Client, via, id, raftAddr string) {
	for attempt := 0; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 35*time.Second)
		err := c.AddVoter(cctx, id, raftAddr)
		cancel()
		if err == nil {
			log.Info("joined the cluster", "via", via)
			return
		}
		log.Warn("could not join yet; retrying", "via", via, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(time.Duration(attempt+1)*500*time.Millisecond, 5*time.Second)):
		}
	}
}
