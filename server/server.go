// Package server answers leasehold's API over Connect (gRPC, gRPC-Web and
// JSON over HTTP on one listener), with /metrics, /healthz and /readyz. It
// validates every field at the edge and maps errors to Connect codes in one
// place (package api).
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/service"
)

// Config wires a server. Front, Service, Registry and Metrics are
// required.
type Config struct {
	// Front is the node as the API front needs it (leadership, health,
	// the forwarding listener): its *cluster.Node, or a test's fake.
	Front Front
	// Service answers the handlers: the node's *service.Service, or a
	// test's fake.
	Service service.API
	Logger  *slog.Logger
	// TracerProvider, if set, traces every API call (continuing the
	// caller's W3C trace context) and its forwarding to the leader. Nil:
	// no spans and no cost.
	TracerProvider trace.TracerProvider
	Registry       *prometheus.Registry // served at /metrics
	Metrics        *Metrics             // registered on Registry
	// NodeID names this node in forwarded requests.
	NodeID string
	// AdvertiseURL is this node's API URL as clients reach it. While this
	// node leads, every answer carries it (header Leasehold-Leader), so a
	// client that lists it among its endpoints can go to the leader
	// directly instead of through a forwarding follower.
	AdvertiseURL string
	// Auth checks bearer tokens; nil serves everyone as admin, which only
	// a loopback or explicitly --insecure node should do.
	Auth *Authenticator
	// AcquireRate is the most acquisitions a second one client may make
	// (0: no limit).
	AcquireRate float64
	// TLS, if set, serves the API over TLS (with client certificates if
	// its ClientAuth asks for them).
	TLS *tls.Config
	// MetricsAuth requires an operator or admin bearer token without
	// prefixes for /metrics (it needs Auth).
	MetricsAuth bool
	// AllowHosts are names besides localhost and AdvertiseURL's host that
	// clients may reach this node by (the Host of a request): without Auth
	// the node refuses any other name, and with Auth its dashboard does
	// (see hostCheck).
	AllowHosts []string
	// MetricsApart leaves /metrics off the API listener: ServeMetrics
	// serves it on a listener of its own.
	MetricsApart bool
	// MaxRequestBytes bounds a request body, or a message of a stream, in
	// the bytes it decodes to (default DefaultMaxRequestBytes). A body that
	// says it is larger is refused before a byte of it is read. For this
	// and the limits below, 0 means the default and a negative value no
	// limit.
	MaxRequestBytes int
	// MaxInflightBodyBytes bounds the decoded bytes that the bodies of all
	// requests in flight may hold together, charged as they arrive (default
	// DefaultMaxInflightBodyBytes); one IP address may hold a quarter of it,
	// or MaxRequestBytes if more. A request over either is refused at once
	// with ResourceExhausted.
	MaxInflightBodyBytes int64
	// BodyTimeout bounds the time a request body may take to arrive after
	// its headers, and a session stream's message after its first byte
	// (default DefaultBodyTimeout). A waiting Acquire's wait comes after
	// its body and is not bounded by it.
	BodyTimeout time.Duration
	// MaxConns bounds the open API connections, and MaxConnsPerClient those
	// from one IP address (defaults DefaultMaxConns and
	// DefaultMaxConnsPerClient).
	MaxConns, MaxConnsPerClient int
	// SessionIdle ends a session stream with nothing unanswered that sent
	// nothing for this long (default DefaultSessionIdle).
	SessionIdle time.Duration
	// MaxQueueBodyBytes bounds a queue message's body (default
	// DefaultMaxQueueBodyBytes; more than leasehold.MaxQueueBody, 1 MiB,
	// is taken as that).
	MaxQueueBodyBytes int
	// QueueDeleted, if set, hears the name of each queue whose deletion
	// this node answered, after the server dropped the queue's series: the
	// node's metrics drop theirs (nodemetrics.Metrics.ForgetQueue).
	QueueDeleted func(queue string)
}

// Defaults of the limits that protect a node from its clients.
const (
	// DefaultMaxRequestBytes holds the largest valid request, a Batch of
	// leasehold.MaxBatchOps acquires with every field at its limit (5.2 MiB
	// as protobuf or compact JSON), with room to spare.
	DefaultMaxRequestBytes = 8 << 20
	// DefaultMaxInflightBodyBytes is two of the largest requests. A
	// decoded request can take twelve times its body (measured: 16 to 320
	// bodies of 8 MiB at once, plain or gzip, peak at 125 to 210 MB of RSS
	// with this budget), while the usual request is under a kilobyte.
	DefaultMaxInflightBodyBytes = 2 * DefaultMaxRequestBytes
	DefaultBodyTimeout          = 30 * time.Second
	DefaultMaxConns             = 4096
	DefaultMaxConnsPerClient    = 512
)

// Server is the API front of one node. NewServer does not listen; Serve
// does; Shutdown is idempotent.
type Server struct {
	front   Front
	log     *slog.Logger
	metrics *Metrics
	http    *http.Server
	fwd     *forwarder
	rate    *rateLimiter // acquisitions per client; nil: no limit
	// maxConns and maxConnsPerClient bound the connections Serve accepts.
	maxConns, maxConnsPerClient int
	forwardOnce                 sync.Once
	mux                         *http.ServeMux // the API listener's routes
	clients                     http.Handler   // mux as clients reach it: forwarding headers stripped
	metricsMux                  *http.ServeMux // /metrics, for ServeMetrics
	mu                          sync.Mutex     // guards metricsSrv
	metricsSrv                  *http.Server   // set by ServeMetrics
	// base is every request's parent context: Shutdown cancels it after a
	// grace period, so requests blocked in a long wait end (and withdraw
	// their place in line) instead of holding the shutdown up.
	base       context.Context
	cancelBase context.CancelFunc
	// watching ends when Shutdown starts: watch streams end at once.
	watching    context.Context
	endWatching context.CancelFunc
	// tls is kept apart from http.TLSConfig, which net/http fills in on
	// first use even for plain listeners.
	tls bool
	// hosts refuses a Host that does not name this node: every request
	// without auth, the dashboard's with auth (authed).
	hosts  *hostCheck
	authed bool
	svc    service.API
	// sessions counts open session streams; sessionIdle ends idle ones.
	sessions    sessionCount
	sessionIdle time.Duration
	// calls are the handlers of the calls a session stream carries, by
	// procedure (bindCalls).
	calls map[string]api.Handler
	// peers serves the requests other nodes forward over the raft port
	// (trust.go), http those of the API listener.
	peers *http.Server
}

// New builds a server. It registers the API's series and Go runtime
// metrics on cfg.Registry.
func New(cfg Config) (*Server, error) {
	if cfg.Front == nil || cfg.Service == nil || cfg.Metrics == nil || cfg.Registry == nil {
		return nil, errors.New("server: front, service, metrics and registry are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.setDefaults()
	s := &Server{front: cfg.Front, log: cfg.Logger, metrics: cfg.Metrics, fwd: newForwarder(cfg.Front, cfg.NodeID),
		svc: cfg.Service}
	var cancel context.CancelFunc
	s.base, cancel = context.WithCancel(context.Background())
	s.cancelBase = func() {
		// The service hears of the shutdown before the requests it serves
		// end: a caller cut off now is told to retry elsewhere.
		if st, ok := s.svc.(interface{ Stop() }); ok {
			st.Stop()
		}
		cancel()
	}
	s.watching, s.endWatching = context.WithCancel(context.Background())
	s.rate = newRateLimiter(cfg.AcquireRate)
	s.maxConns, s.maxConnsPerClient = cfg.MaxConns, cfg.MaxConnsPerClient
	s.sessionIdle = cfg.SessionIdle
	s.tls = cfg.TLS != nil
	cfg.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	mux := http.NewServeMux()
	interceptors := []connect.Interceptor{newRequestCounter(cfg.Registry), s.fwd.forwardAndMap(), &guard{auth: cfg.Auth, base: s.base},
		leaderHint(cfg.Front, cfg.AdvertiseURL)}
	if cfg.TracerProvider != nil {
		// Outermost, so that a forward to the leader is a child of the call.
		s.fwd.tracer = cfg.TracerProvider.Tracer(tracerName)
		interceptors = append([]connect.Interceptor{serverSpans(s.fwd.tracer, cfg.NodeID)}, interceptors...)
	}
	guard := connect.WithInterceptors(interceptors...)
	// Replies are small: compressing them costs more CPU than it saves.
	// Requests are inflated by the body guard (bodies), not by connect.
	codecs := []connect.HandlerOption{connect.WithCodec(protoCodec{}), connect.WithCompressMinBytes(8 << 10), gzipHere}
	for _, c := range jsonCodecs() {
		codecs = append(codecs, connect.WithCodec(c))
	}
	codec := connect.WithHandlerOptions(codecs...)
	bodies := newBodyGuard(cfg.MaxInflightBodyBytes, int64(cfg.MaxRequestBytes), cfg.BodyTimeout,
		connect.NewErrorWriter(codec), s.refused)
	large, small, session := requestLimits(int64(cfg.MaxRequestBytes))
	cfg.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "leasehold_inflight_body_bytes",
		Help: "Bytes of request bodies in flight, as they decode (limit max_inflight_body_bytes)."},
		func() float64 { return float64(bodies.inFlight()) }))
	cfg.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "leasehold_sessions",
		Help: "Session streams this node serves (Go clients' lease, queue and idempotency calls)."},
		func() float64 { return float64(s.sessions.count()) }))
	impls := map[string]any{} // each service's handlers, by service name
	mount := func(lim bodyLimit) func(string, http.Handler) {
		return func(path string, h http.Handler) { mux.Handle(path, bodies.wrap(lim, h)) }
	}
	mountLarge, mountSmall := mount(large), mount(small)
	mountLarge(handlerOf(impls, leaseholdv1connect.NewLeasesHandler, leases{s}, guard, codec))
	mountSmall(handlerOf(impls, leaseholdv1connect.NewClusterHandler, clusterAPI{s}, guard, codec))
	mountLarge(handlerOf(impls, leaseholdv1connect.NewKVHandler, kvAPI{s}, guard, codec))
	mountSmall(handlerOf(impls, leaseholdv1connect.NewAdminHandler, &adminAPI{s}, guard, codec))
	mountSmall(handlerOf(impls, leaseholdv1connect.NewElectionsHandler, elections{s}, guard, codec))
	mountSmall(handlerOf(impls, leaseholdv1connect.NewWatchHandler, watchAPI{s}, guard, codec))
	mountLarge(handlerOf(impls, leaseholdv1connect.NewIdempotencyHandler, newIdemAPI(s, cfg.Registry), guard, codec))
	mountLarge(handlerOf(impls, leaseholdv1connect.NewQueuesHandler, newQueuesAPI(s, cfg.MaxQueueBodyBytes, cfg.QueueDeleted), guard, codec))
	mountSmall(handlerOf(impls, leaseholdv1connect.NewGroupsHandler, newGroupsAPI(s), guard, codec))
	mountSmall(handlerOf(impls, leaseholdv1connect.NewBarriersHandler, newBarriersAPI(s, cfg.Registry), guard, codec))
	// A session's body is a stream that lasts as long as the client:
	// bounded per message, by ops unanswered and by idle time.
	mount(session)(handlerOf(impls, leaseholdv1connect.NewSessionsHandler, sessionsAPI{s}, guard, codec))
	var err error
	if s.calls, err = bindCalls(impls); err != nil {
		return nil, err
	}
	metrics := http.Handler(promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{Registry: cfg.Registry}))
	if cfg.MetricsAuth {
		if cfg.Auth == nil {
			return nil, errors.New("server: metrics auth needs an authenticator")
		}
		metrics = requireScraper(cfg.Auth, metrics)
	}
	s.metricsMux = http.NewServeMux()
	s.metricsMux.Handle("/metrics", metrics)
	if !cfg.MetricsApart {
		mux.Handle("/metrics", metrics)
	}
	mux.HandleFunc("/healthz", s.healthy)
	mux.HandleFunc("/readyz", s.ready)

	var protocols http.Protocols
	protocols.SetHTTP1(true)
	if cfg.TLS != nil {
		protocols.SetHTTP2(true)
	} else {
		protocols.SetUnencryptedHTTP2(true) // gRPC without TLS
	}
	s.mux = mux
	s.hosts, s.authed = newHostCheck(cfg.AdvertiseURL, cfg.AllowHosts, connect.NewErrorWriter(codec)), cfg.Auth != nil
	s.clients = fromClients(mux)
	s.http = s.httpServer(s.hostChecked(s.clients), cfg.Logger)
	s.http.Protocols, s.http.TLSConfig = &protocols, cfg.TLS
	s.peers = s.httpServer(mux, cfg.Logger)
	return s, nil
}

// httpServer is an http.Server of h with the node's bounds.
func (s *Server) httpServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       s.baseContext,
	}
}

// handlerOf builds the handler of one service from impl (an H), and keeps
// impl among impls for the session stream's calls (bindCalls).
func handlerOf[H, I any](impls map[string]any, newHandler func(H, ...connect.HandlerOption) (string, http.Handler),
	impl I, opts ...connect.HandlerOption) (string, http.Handler) {
	path, h := newHandler(any(impl).(H), opts...)
	impls[strings.Trim(path, "/")] = impl
	return path, h
}

func (c *Config) setDefaults() {
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.MaxInflightBodyBytes == 0 {
		c.MaxInflightBodyBytes = DefaultMaxInflightBodyBytes
	}
	if c.BodyTimeout == 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	if c.SessionIdle == 0 {
		c.SessionIdle = DefaultSessionIdle
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxConnsPerClient == 0 {
		c.MaxConnsPerClient = DefaultMaxConnsPerClient
	}
	if c.MaxQueueBodyBytes <= 0 {
		c.MaxQueueBodyBytes = DefaultMaxQueueBodyBytes
	}
	c.MaxQueueBodyBytes = min(c.MaxQueueBodyBytes, leasehold.MaxQueueBody) // the state's ceiling
}

// refused counts a connection or request refused by one of the node's
// limits.
func (s *Server) refused(limit string) { s.metrics.Refused.WithLabelValues(limit).Inc() }

// healthy answers 200 while the node runs, and 503 with the reason once it
// stopped on a failed log write: it will not serve again until restarted,
// so a liveness probe should restart it.
func (s *Server) healthy(w http.ResponseWriter, _ *http.Request) {
	if err := s.front.Fault(); err != nil {
		http.Error(w, "stopped: "+err.Error()+"; restart the process\n", http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("ok\n"))
}

// ready answers 200 when this node can serve: it leads and a quorum just
// confirmed it, or it follows a leader it heard from recently.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	if err := s.front.Ready(ctx); err != nil {
		http.Error(w, "not ready: "+err.Error()+"\n", http.StatusServiceUnavailable)
		return
	}
	id, addr := s.front.Leader()
	w.Write([]byte("ready: leader " + id + " at " + addr + "\n"))
}

// Handler is the server's HTTP handler as the API listener serves it,
// without the Host check: for callers in this process (the dashboard),
// tests and embedding.
func (s *Server) Handler() http.Handler { return s.clients }

// Mount serves h for the paths under pattern on the API listener, beside
// the API (the dashboard: its handler calls the API through Handler, so it
// is built after the server), behind the Host check even with auth: a
// browser's cookies are what h trusts. Call it before Serve.
func (s *Server) Mount(pattern string, h http.Handler) {
	if s.authed {
		h = s.hosts.wrap(h)
	}
	s.mux.Handle(pattern, h)
}

// hostChecked is h behind the Host check if the node has no auth (with
// auth, bearer tokens guard the API and /metrics: a browser does not send
// them on its own).
func (s *Server) hostChecked(h http.Handler) http.Handler {
	if s.authed {
		return h
	}
	return s.hosts.wrap(h)
}

// Serve answers requests on l until Shutdown. The first call also starts
// answering requests that other nodes forward over the raft port.
func (s *Server) Serve(l net.Listener) error {
	s.forwardOnce.Do(func() {
		// Forwarded requests arrive over the raft port, already inside its
		// TLS when raft TLS is on: the only requests whose node headers
		// count (trust.go).
		go s.peers.Serve(nodeListener{s.front.ForwardListener()})
	})
	l = limitConns(l, s.maxConns, s.maxConnsPerClient, s.refused)
	var err error
	if s.tls {
		err = s.http.ServeTLS(l, "", "")
	} else {
		err = s.http.Serve(l)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// ServeMetrics answers /metrics alone on l (a listener apart from the
// API's, see Config.MetricsApart) until Shutdown.
func (s *Server) ServeMetrics(l net.Listener) error {
	s.mu.Lock()
	s.metricsSrv = &http.Server{
		Handler:           s.hostChecked(s.metricsMux),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          s.http.ErrorLog,
	}
	srv := s.metricsSrv
	s.mu.Unlock()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops accepting requests and waits for those in flight until ctx
// ends, then closes what is left.
func (s *Server) Shutdown(ctx context.Context) error {
	// Background work tied to base (withdrawals waiting out their grace)
	// ends with the server, however quick the shutdown.
	defer s.cancelBase()
	s.endWatching()
	t := time.AfterFunc(time.Second, s.cancelBase)
	defer t.Stop()
	s.mu.Lock()
	if s.metricsSrv != nil {
		s.metricsSrv.Close() // scrapes are quick and harmless to cut
	}
	s.mu.Unlock()
	peers := make(chan error, 1)
	go func() { peers <- s.peers.Shutdown(ctx) }()
	err := s.http.Shutdown(ctx)
	if err = errors.Join(err, <-peers); err != nil {
		s.http.Close()
		s.peers.Close()
	}
	return err
}
