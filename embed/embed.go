// Package embed wires one leasehold node: raft and the state machine
// (cluster.Open), its metrics (nodemetrics: what it applies, raft, its
// state's gauges, commit latency; server: what the API answers), the API
// server and its listeners. `leasehold serve`, the test harness and the
// embedded benchmark all start their nodes through Start, so the three
// cannot drift apart.
package embed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/nodemetrics"
	"github.com/leasehold/leasehold/server"
	"github.com/leasehold/leasehold/service"
	"github.com/leasehold/leasehold/ui"
)

// Config is what Start wires.
type Config struct {
	// Cluster configures raft and the state machine. Its RaftListener, if
	// set, is used instead of listening on RaftAddr. Its CommitLatency, if
	// set, hears commit latencies besides the node's metrics.
	Cluster cluster.Config
	// Server configures the API. Start fills in Front (the node), Registry
	// and Metrics, and Service unless it is set (the node's own,
	// service.New); NodeID and Logger default to the cluster's.
	Server server.Config
	// API is the already-bound listener for the API (required); Start
	// serves on it and Close closes it.
	API net.Listener
	// Metrics, if set, serves /metrics apart from the API (see
	// server.Config.MetricsApart, which Start sets).
	Metrics net.Listener
	// History bounds the node's event history for watches (zero: the
	// defaults of service.DefaultHubConfig).
	History service.HubConfig
	// NoDashboard leaves the web dashboard out: /ui/ answers 404 and no
	// chart sampler runs. The API and its roles are unchanged.
	NoDashboard bool
}

// Node is a running node and its API server.
type Node struct {
	Cluster  *cluster.Node
	Server   *server.Server
	Registry *prometheus.Registry
	Metrics  *server.Metrics
	// NodeMetrics are the node's own series (on Registry too).
	NodeMetrics *nodemetrics.Metrics
	// Hub is the node's event history, which watches read.
	Hub *service.Hub
	// URL is the API's URL as the listener bound it (http:// or https://).
	URL string

	served chan error
	api    net.Listener
	log    *slog.Logger
	// stopCharts ends the dashboard's metric sampler; charted is closed
	// when it has.
	stopCharts context.CancelFunc
	charted    chan struct{}
}

// Start opens the node and serves its API. It does not wait for a leader.
// On error every listener given is closed.
func Start(cfg Config) (*Node, error) {
	if cfg.API == nil {
		return nil, errors.New("embed: an API listener is required")
	}
	closeListeners := func() {
		cfg.API.Close()
		if cfg.Metrics != nil {
			cfg.Metrics.Close()
		}
	}
	reg := prometheus.NewRegistry()
	metrics := server.NewMetrics(reg)
	nm := nodemetrics.New(reg)
	ccfg := cfg.Cluster
	ccfg.CommitLatency = nm.ObserveCommit
	hub := service.NewHub(cfg.History)
	ccfg.History = nm.CountLeaderChanges(hub)
	if own := cfg.Cluster.CommitLatency; own != nil {
		ccfg.CommitLatency = func(d time.Duration) { own(d); nm.ObserveCommit(d) }
	}
	cn, err := cluster.Open(ccfg, nm)
	if err != nil {
		closeListeners()
		return nil, fmt.Errorf("open node %s: %w", ccfg.NodeID, err)
	}
	nm.WatchNode(cn)
	nm.WatchHub(hub)

	scfg := cfg.Server
	scfg.Front, scfg.Registry, scfg.Metrics = cn, reg, metrics
	if own := scfg.QueueDeleted; own != nil {
		scfg.QueueDeleted = func(q string) { own(q); nm.ForgetQueue(q) }
	} else {
		scfg.QueueDeleted = nm.ForgetQueue
	}
	if scfg.NodeID == "" {
		scfg.NodeID = ccfg.NodeID
	}
	if scfg.Logger == nil {
		scfg.Logger = ccfg.Logger
	}
	if scfg.Service == nil {
		scfg.Service = service.New(cn, hub, scfg.Logger)
	}
	if scfg.TracerProvider == nil {
		scfg.TracerProvider = ccfg.TracerProvider
	}
	scfg.MetricsApart = scfg.MetricsApart || cfg.Metrics != nil
	srv, err := server.New(scfg)
	if err != nil {
		closeListeners()
		cn.Close()
		return nil, err
	}
	var dash *ui.Dashboard
	if !cfg.NoDashboard {
		dash, err = ui.New(ui.Config{API: srv.Handler(), Identify: identify(scfg.Auth), Metrics: reg,
			Secure: scfg.TLS != nil, Logger: scfg.Logger,
			GroupRebalances: func(limit int) map[string]uint64 { return service.GroupRebalances(cn, limit) }})
		if err != nil {
			closeListeners()
			cn.Close()
			return nil, err
		}
		srv.Mount("/ui/", dash)
	}
	scheme := "http://"
	if scfg.TLS != nil {
		scheme = "https://"
	}
	n := &Node{Cluster: cn, Server: srv, Registry: reg, Metrics: metrics, NodeMetrics: nm, Hub: hub, URL: scheme + cfg.API.Addr().String(),
		served: make(chan error, 2), api: cfg.API, log: scfg.Logger}
	var charts context.Context
	charts, n.stopCharts = context.WithCancel(context.Background())
	n.charted = make(chan struct{})
	go func() {
		defer close(n.charted)
		if dash != nil {
			dash.Sample(charts)
		}
	}()
	go func() { n.served <- srv.Serve(cfg.API) }()
	if cfg.Metrics != nil {
		go func() { n.served <- srv.ServeMetrics(cfg.Metrics) }()
	}
	return n, nil
}

// Served reports an error from serving a listener (nil after a clean
// shutdown).
func (n *Node) Served() <-chan error { return n.served }

// APIAddr is the address the API listens on.
func (n *Node) APIAddr() net.Addr { return n.api.Addr() }

// Close shuts the server down, waiting for requests in flight until ctx
// ends (those cut off are logged), and closes the node, returning its
// error. It is safe to call twice.
//
// The node is closed even if the server has not finished within a second:
// the server also serves forwarded requests on a listener the node owns,
// and that only ends once the node is closed.
func (n *Node) Close(ctx context.Context) error {
	n.stopCharts()
	<-n.charted
	shut := make(chan error, 1)
	go func() { shut <- n.Server.Shutdown(ctx) }()
	t := time.NewTimer(time.Second)
	defer t.Stop()
	var serr error
	shutDown := false
	select {
	case serr = <-shut:
		shutDown = true
	case <-t.C:
	}
	err := n.Cluster.Close()
	if !shutDown {
		select {
		case serr = <-shut:
		case <-ctx.Done():
			serr = ctx.Err()
		}
	}
	if serr != nil {
		n.log.Warn("requests still in flight were cut off", "err", serr)
	}
	if err != nil {
		return fmt.Errorf("close node: %w", err)
	}
	return nil
}

// identify tells the dashboard who a bearer token names, by the API's own
// roles; without auth (a nil Authenticator) everyone is an anonymous
// admin, as in the API.
func identify(auth *server.Authenticator) func(string) (ui.Viewer, error) {
	return func(token string) (ui.Viewer, error) {
		p, err := auth.Lookup(token)
		if err != nil {
			return ui.Viewer{}, err
		}
		return ui.Viewer{Name: p.Name, CanView: p.Role >= server.RoleOperator, CanAct: p.Role >= server.RoleAdmin,
			Prefixes: p.Prefixes}, nil
	}
}
