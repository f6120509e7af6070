// Package client is leasehold's Go client: leases with fencing tokens,
// background renewal that needs observable progress, and a deliberate
// choice between failing closed and failing open when the store is
// unreachable.
//
// The client imports only the domain types and the generated API, never
// raft or the server.
package client

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/clock"
)

// Config configures a Client. Only Endpoints is required.
type Config struct {
	// Endpoints are base URLs of leasehold nodes, such as
	// "http://127.0.0.1:7420". Requests go to one and move to the next when
	// it is unavailable.
	Endpoints []string
	// HTTPClient carries the requests; a pooled client is made if nil.
	HTTPClient *http.Client
	// Logger receives warnings about lost and degraded leases and failed
	// renewals. Nil discards them: the client never writes to the
	// process's default logger unless given it (slog.Default()).
	Logger *slog.Logger
	// Metrics, if set, counts acquisitions by outcome, renewal failures,
	// lost leases, work after loss and degraded leases: see Metrics
	// (clientprom.New(reg) counts into a Prometheus registry). Nil counts
	// nothing.
	Metrics Metrics
	// Drift is subtracted from every expiry the server reports, on top of
	// DriftRatio of it, to cover clock-rate differences and pauses between
	// sending a request and reading the clock. Default 10ms.
	Drift time.Duration
	// DriftRatio is the share of each reported expiry treated as unsafe.
	// Default 0.02.
	DriftRatio float64
	// Timeout bounds a call whose context has no deadline: it gives up
	// after Timeout (plus the wait it asked for: Wait, PollWait) with an
	// error matching leasehold.ErrUnavailable that names the endpoints,
	// however many attempts fit in it. A stream (Watch, Observe,
	// Assignments, Snapshot) is bounded so until it opens; an open one
	// is not cut. A context's own deadline takes its place. Default 10s,
	// as the CLI's --timeout; negative: no bound, retry until ctx ends.
	Timeout time.Duration
	// RequestTimeout bounds one attempt of a call that does not wait.
	// Default 5s.
	RequestTimeout time.Duration
	// CloseTimeout bounds how long Close spends giving back what the
	// client holds; what is not given back by then expires after its TTL.
	// Default 3s (DefaultCloseTimeout).
	CloseTimeout time.Duration
	// Token is the bearer token sent with every request, if the cluster
	// requires one.
	Token string
	// TLS configures https endpoints (a CA to trust, a client certificate
	// for mTLS). Ignored when HTTPClient is given.
	TLS *tls.Config
	// MaxBatch is the most acquires, renewals and releases sent together
	// in one request. Calls that goroutines of this client make while
	// earlier requests are out go together in the next one, sharing one
	// round trip and one commit on the server. Default 128; 1 sends each
	// call on its own.
	MaxBatch int
	// Tracing, if set, traces every call and sends its context to the
	// node, so a slow call can be followed through the node, its forward
	// to the leader and the raft commit: see Tracing (clientotel.New(tp)
	// traces with OpenTelemetry). Nil: no spans.
	Tracing Tracing
	// Session chooses whether acquires, renewals and releases (and the
	// queue's sends, receives, acks and nacks, idempotency's Begin,
	// Complete and Abandon, a group member's AckRevocation) travel on a
	// session stream (HTTP/2) or as unary calls; see SessionMode.
	// The stream needs MaxBatch > 1. With HTTPClient given, the stream
	// uses it, and falls back to unary calls if it cannot speak HTTP/2;
	// otherwise the client makes an HTTP/2 transport for it (h2c for
	// http:// endpoints).
	Session SessionMode
	// Clock is the clock lease deadlines are counted and waited on (its
	// monotonic reading); nil is the system clock. Fault tests give a
	// client a clock that runs fast or slow (clock.Skewed).
	Clock clock.Clock
}

// Client talks to a leasehold cluster. It is safe for concurrent use.
type Client struct {
	cfg     Config
	log     *slog.Logger
	nodes   []endpoint
	cur     atomic.Int32 // index into nodes of the endpoint in use
	metrics Metrics
	batch   *coalescer // nil when MaxBatch is 1
	session *session   // nil with SessionOff or MaxBatch 1

	// Close and what it stops (close.go).
	closeOnce     sync.Once
	closeErr      error       // what Close returned
	closed        atomic.Bool // calls fail with ErrClosed
	mu            sync.Mutex
	closing       bool                    // Close has begun: no lease is tracked, no give-back starts
	closeBegun    context.Context         // canceled when Close begins: ends waits for a grant
	endWaits      context.CancelCauseFunc // cancels closeBegun
	held          map[*Lease]struct{}     // leases whose renewal loop runs
	givingBack    sync.WaitGroup          // giveBack goroutines
	bg            context.Context         // canceled by Close: ends give-backs
	stopGiveBacks context.CancelFunc
	ownTransport  *http.Transport // made by New, nil if Config.HTTPClient was given
	ownStream     *http.Transport // New's HTTP/2 transport for the session stream, or nil
}

// New makes a client. It does not contact the servers.
func New(cfg Config) (*Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("client: at least one endpoint is required")
	}
	var own *http.Transport
	if cfg.HTTPClient == nil {
		own = defaultTransport(cfg)
		cfg.HTTPClient = &http.Client{Transport: own}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Drift == 0 {
		cfg.Drift = 10 * time.Millisecond
	}
	if cfg.DriftRatio == 0 {
		cfg.DriftRatio = 0.02
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.CloseTimeout == 0 {
		cfg.CloseTimeout = DefaultCloseTimeout
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = 128
	}
	if cfg.MaxBatch < 1 || cfg.MaxBatch > leasehold.MaxBatchOps {
		return nil, fmt.Errorf("client: MaxBatch %d must be 1 to %d", cfg.MaxBatch, leasehold.MaxBatchOps)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NoMetrics{}
	}
	c := &Client{cfg: cfg, log: cfg.Logger, metrics: cfg.Metrics,
		held: map[*Lease]struct{}{}, ownTransport: own}
	c.bg, c.stopGiveBacks = context.WithCancel(context.Background())
	c.closeBegun, c.endWaits = context.WithCancelCause(context.Background())
	if cfg.MaxBatch > 1 {
		c.batch = &coalescer{c: c, max: cfg.MaxBatch}
	}
	var opts []connect.ClientOption
	if cfg.Tracing != nil {
		opts = append(opts, connect.WithInterceptors(cfg.Tracing.Interceptor()))
	}
	if cfg.Token != "" {
		opts = append(opts, connect.WithInterceptors(bearer(cfg.Token)))
	}
	for _, e := range cfg.Endpoints {
		e = strings.TrimRight(strings.TrimSpace(e), "/")
		if !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") {
			return nil, fmt.Errorf("client: endpoint %q must start with http:// or https://", e)
		}
		c.nodes = append(c.nodes, endpoint{
			url:       e,
			leases:    leaseholdv1connect.NewLeasesClient(cfg.HTTPClient, e, opts...),
			cluster:   leaseholdv1connect.NewClusterClient(cfg.HTTPClient, e, opts...),
			kv:        leaseholdv1connect.NewKVClient(cfg.HTTPClient, e, opts...),
			admin:     leaseholdv1connect.NewAdminClient(cfg.HTTPClient, e, opts...),
			elections: leaseholdv1connect.NewElectionsClient(cfg.HTTPClient, e, opts...),
			watch:     leaseholdv1connect.NewWatchClient(cfg.HTTPClient, e, opts...),
			idem:      leaseholdv1connect.NewIdempotencyClient(cfg.HTTPClient, e, opts...),
			queues:    leaseholdv1connect.NewQueuesClient(cfg.HTTPClient, e, opts...),
			groups:    leaseholdv1connect.NewGroupsClient(cfg.HTTPClient, e, opts...),
			barriers:  leaseholdv1connect.NewBarriersClient(cfg.HTTPClient, e, opts...),
		})
	}
	if cfg.Session != SessionOff && c.batch != nil {
		hc := cfg.HTTPClient
		if own != nil {
			c.ownStream = streamTransport(cfg)
			hc = &http.Client{Transport: c.ownStream}
		}
		c.session = newSession(c, hc, opts)
	}
	return c, nil
}

// endpoint holds the service clients for one node.
type endpoint struct {
	url       string
	leases    leaseholdv1connect.LeasesClient
	cluster   leaseholdv1connect.ClusterClient
	kv        leaseholdv1connect.KVClient
	admin     leaseholdv1connect.AdminClient
	elections leaseholdv1connect.ElectionsClient
	watch     leaseholdv1connect.WatchClient
	idem      leaseholdv1connect.IdempotencyClient
	queues    leaseholdv1connect.QueuesClient
	groups    leaseholdv1connect.GroupsClient
	barriers  leaseholdv1connect.BarriersClient
}

// Service pickers for call.
func leasesOf(e *endpoint) leaseholdv1connect.LeasesClient       { return e.leases }
func clusterOf(e *endpoint) leaseholdv1connect.ClusterClient     { return e.cluster }
func kvOf(e *endpoint) leaseholdv1connect.KVClient               { return e.kv }
func adminOf(e *endpoint) leaseholdv1connect.AdminClient         { return e.admin }
func electionsOf(e *endpoint) leaseholdv1connect.ElectionsClient { return e.elections }

// bearer adds the token to every request.
func bearer(token string) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+token)
			return next(ctx, req)
		}
	}
}

// safeExpiry turns an expiry reported by the server into one the client may
// trust, counted from before the request was sent (invariant 3).
func (c *Client) safeExpiry(sent time.Time, expiresIn time.Duration) time.Time {
	margin := c.cfg.Drift + time.Duration(float64(expiresIn)*c.cfg.DriftRatio)
	return sent.Add(expiresIn - margin)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// call runs RPC f of the service svc picks, against the current endpoint,
// moving on to the next and retrying while the error is Unavailable, until
// ctx ends or the client's bound passes (see bound). The request carries
// the same request ID on every attempt, so a retry never acts twice.
// perTry > 0 bounds each attempt.
func call[S, Req, Res any](ctx context.Context, c *Client, perTry time.Duration, svc func(*endpoint) S,
	f func(S, context.Context, *connect.Request[Req]) (*connect.Response[Res], error),
	msg *Req) (*Res, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	ctx, stop := c.bound(ctx, 0)
	defer stop()
	if res, ok, err := onSession[Res](ctx, c, msg); ok {
		return res, err
	}
	var retry backoff
	var last error // the last transport failure, kept for the error when ctx ends
	for attempt := 0; ; attempt++ {
		i := int(c.cur.Load()) % len(c.nodes)
		tctx, cancel := ctx, context.CancelFunc(func() {})
		if perTry > 0 {
			tctx, cancel = context.WithTimeout(ctx, perTry)
		}
		resp, err := f(svc(&c.nodes[i]), tctx, connect.NewRequest(msg))
		timedOut := tctx.Err() != nil
		cancel()
		if err == nil {
			c.follow(resp.Header().Get(leaderHeader))
			return resp.Msg, nil
		}
		if ctx.Err() != nil {
			return nil, c.ended(ctx, last)
		}
		e := api.FromConnect(err)
		if !connect.IsWireError(err) {
			switch connect.CodeOf(err) {
			case connect.CodeCanceled, connect.CodeDeadlineExceeded:
				// Not the caller's ctx (checked above) and not a server's
				// answer: a reset or broken connection (connect reports
				// ECONNRESET and EPIPE as Canceled) or this attempt's own
				// timeout. The request ID makes the retry safe.
				e = &leasehold.Error{Code: leasehold.CodeUnavailable, Message: err.Error()}
				if timedOut {
					e = unanswered(c.nodes[i].url, perTry)
				}
			}
		}
		if !errors.Is(e, leasehold.ErrUnavailable) {
			return nil, e
		}
		last = e
		if !c.moveOn(ctx, i, retry.next()) {
			return nil, c.ended(ctx, e)
		}
	}
}

// moveOn is a retry's step after node i failed: it makes the next node the
// current one (unless another call did already) and waits pause. It
// returns false if ctx ends first.
func (c *Client) moveOn(ctx context.Context, i int, pause time.Duration) bool {
	if len(c.nodes) > 1 {
		c.cur.CompareAndSwap(int32(i), int32((i+1)%len(c.nodes)))
	}
	t := time.NewTimer(pause)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// leaderHeader is server.LeaderHeader (the client does not import the
// server).
const leaderHeader = "Leasehold-Leader"

// follow makes the leader the current endpoint when an answer names it and
// it is one of the configured endpoints, saving a forwarding hop.
func (c *Client) follow(leader string) {
	if leader == "" {
		return
	}
	for i := range c.nodes {
		if c.nodes[i].url == strings.TrimRight(leader, "/") {
			c.cur.Store(int32(i))
			return
		}
	}
}

// Get shows a resource: its holder, token, expiry and waiters.
func (c *Client) Get(ctx context.Context, resource string) (*ResourceInfo, error) {
	r, err := call(ctx, c, c.cfg.RequestTimeout, leasesOf, leaseholdv1connect.LeasesClient.Get, &pb.GetRequest{Resource: resource})
	if err != nil {
		return nil, err
	}
	return resourceInfo(r), nil
}

// List returns one page of held leases: pageSize of them (0: the server's
// default of 100; at most 1000), from pageToken ("" for the first page).
// Leases reads every page.
func (c *Client) List(ctx context.Context, prefix string, pageSize int, pageToken string) (Page, error) {
	r, err := call(ctx, c, c.cfg.RequestTimeout, leasesOf, leaseholdv1connect.LeasesClient.List,
		&pb.ListRequest{Prefix: prefix, PageSize: int32(pageSize), PageToken: pageToken})
	if err != nil {
		return Page{}, err
	}
	return Page{Leases: leaseInfos(r.Leases), NextPageToken: r.NextPageToken}, nil
}

// RenewByID renews a lease known only by its id and secret (as the CLI
// does), with a progress note unless progress is empty. It returns the
// lease as the server now has it (nil from a server that leaves it out)
// and how long it now runs on the leader's clock, counted from before the
// request was sent. It returns an error wrapping leasehold.ErrNotFound if
// the lease had already ended.
func (c *Client) RenewByID(ctx context.Context, id uint64, secret, progress string) (*LeaseInfo, time.Duration, error) {
	r, err := c.renewCall(ctx, &pb.RenewRequest{LeaseId: id, Secret: secret, Progress: progress, RequestId: randomHex(16)})
	if err != nil {
		return nil, 0, err
	}
	return leaseInfo(r.GetLease()), dur(r.GetExpiresIn()), nil
}

// ReleaseByID releases a lease known only by its id and secret (as the CLI
// does). It returns an error wrapping leasehold.ErrNotFound if the lease had
// already ended.
func (c *Client) ReleaseByID(ctx context.Context, id uint64, secret string) error {
	_, err := c.releaseCall(ctx, &pb.ReleaseRequest{LeaseId: id, Secret: secret, RequestId: randomHex(16)})
	if errors.Is(err, leasehold.ErrNotFound) {
		c.metrics.WorkAfterLoss()
	}
	return err
}
