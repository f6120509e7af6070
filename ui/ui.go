// Package ui serves the operators' dashboard at /ui/ on every node:
// server-rendered html/template pages, kept live by server-sent events
// (live.go, static/dash.js), embedded in the binary so it works offline.
// The charts are drawn by uPlot: static/vendor/uplot is the npm package
// that web/package-lock.json pins, copied by web/build.sh (MIT, its
// LICENSE beside it); TestVendoredAssetsMatchTheLockfile keeps them so.
//
// The dashboard is a client of the node's own API, called in process with
// the viewer's bearer token: it shows and does exactly what the API allows
// that token (an operator sees, an admin may force a release), a write made
// on a follower is forwarded to the leader like any other, and the audit
// log names the token's owner as the actor.
package ui

import (
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

//go:embed static templates
var files embed.FS

// Viewer is who a bearer token names, as far as the dashboard cares.
type Viewer struct {
	Name    string
	CanView bool // operator or admin: inspection, cluster status, audit log
	CanAct  bool // admin: forced release
	// Prefixes limit what the viewer sees and acts on (none, or "": all).
	Prefixes []string
}

// ErrUnknownToken is what Config.Identify returns for a token the node
// does not know (any error will do; the message is shown at login).
var ErrUnknownToken = errors.New("unknown token")

// Config wires a dashboard.
type Config struct {
	// API is the node's API handler (server.Server.Handler): every page
	// reads through it.
	API http.Handler
	// Identify names the viewer of a bearer token ("" when the browser
	// sent none). Without auth it answers for "" as the API would: an
	// anonymous admin.
	Identify func(token string) (Viewer, error)
	// Metrics is the node's registry, sampled for the charts.
	Metrics prometheus.Gatherer
	// Secure marks the cookies Secure (the API is served over TLS).
	Secure bool
	Logger *slog.Logger
	// SampleEvery is the charts' step (default 10 s) and Samples how
	// many steps they keep (default 360: the last hour).
	SampleEvery time.Duration
	Samples     int
	// GroupRebalances reads each partition group's rebalance count from
	// this node's applied state (at most limit groups, the first by
	// name), for the per-group charts; nil charts none.
	GroupRebalances func(limit int) map[string]uint64
}

// A view is one entry of the menu, one per primitive the node serves.
type view struct{ Nav, Title, Path string }

var views = []view{
	{"leases", "Leases", "/ui/leases"},
	{"elections", "Elections", "/ui/elections"},
	{"idempotency", "Idempotency keys", "/ui/idempotency"},
	{"queues", "Queues", "/ui/queues"},
	{"groups", "Groups", "/ui/groups"},
	{"barriers", "Barriers", "/ui/barriers"},
	{"cluster", "Cluster", "/ui/cluster"},
	{"audit", "Audit log", "/ui/audit"},
	{"charts", "Charts", "/ui/charts"},
}

// Dashboard is the http.Handler of /ui/.
type Dashboard struct {
	cfg     Config
	mux     *http.ServeMux
	pages   map[string]*template.Template
	admin   leaseholdv1connect.AdminClient
	cluster leaseholdv1connect.ClusterClient
	elect   leaseholdv1connect.ElectionsClient
	idem    leaseholdv1connect.IdempotencyClient
	watch   leaseholdv1connect.WatchClient
	queues  leaseholdv1connect.QueuesClient
	groups  leaseholdv1connect.GroupsClient
	// barriers, like every client above, calls the node in process.
	barriers leaseholdv1connect.BarriersClient
	charts   *sampler
	risk     template.HTML // the runbook's forced-release section
	runbook  template.HTML // the whole runbook, rendered
	streams  streams
	// stopped ends the event streams when Sample's context does.
	stopped  context.Context
	stop     context.CancelFunc
	log      *slog.Logger
	loginTpl *template.Template
	// origins refuses a form posted from another origin (see sameOrigin).
	origins http.CrossOriginProtection
}

// New builds a dashboard. Run its sampler with Sample.
func New(cfg Config) (*Dashboard, error) {
	if cfg.API == nil || cfg.Identify == nil || cfg.Metrics == nil {
		return nil, errors.New("ui: API, Identify and Metrics are required")
	}
	if cfg.SampleEvery <= 0 {
		cfg.SampleEvery = 10 * time.Second
	}
	if cfg.Samples <= 0 {
		cfg.Samples = 360
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	d := &Dashboard{cfg: cfg, log: cfg.Logger, charts: newSampler(cfg.Metrics, cfg.GroupRebalances, cfg.Samples)}
	d.stopped, d.stop = context.WithCancel(context.Background())
	hc, base := inProcess{api: cfg.API}, "http://node.in-process"
	opt := connect.WithClientOptions()
	d.admin = leaseholdv1connect.NewAdminClient(hc, base, opt)
	d.cluster = leaseholdv1connect.NewClusterClient(hc, base, opt)
	d.elect = leaseholdv1connect.NewElectionsClient(hc, base, opt)
	d.idem = leaseholdv1connect.NewIdempotencyClient(hc, base, opt)
	d.watch = leaseholdv1connect.NewWatchClient(hc, base, opt)
	d.queues = leaseholdv1connect.NewQueuesClient(hc, base, opt)
	d.groups = leaseholdv1connect.NewGroupsClient(hc, base, opt)
	d.barriers = leaseholdv1connect.NewBarriersClient(hc, base, opt)
	if err := d.parse(); err != nil {
		return nil, err
	}
	d.routes()
	return d, nil
}

func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// Nothing here may be framed, sniffed, or load a script from elsewhere.
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	if !d.sameOrigin(w, r) {
		return
	}
	d.mux.ServeHTTP(w, r)
}

// Sample records a chart sample every SampleEvery until ctx ends; then it
// ends the live pages' event streams too (the node is closing).
func (d *Dashboard) Sample(ctx context.Context) {
	defer d.stop()
	d.charts.take(time.Now())
	t := time.NewTicker(d.cfg.SampleEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			d.charts.take(now)
		}
	}
}

func (d *Dashboard) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(files, "static")
	m.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/leases", http.StatusSeeOther)
	})
	m.HandleFunc("GET /ui/login", d.loginForm)
	m.HandleFunc("POST /ui/login", d.login)
	m.HandleFunc("POST /ui/logout", d.logout)
	m.HandleFunc("GET /ui/leases", d.viewing(d.tablePage(leasesTable)))
	m.HandleFunc("GET /ui/leases/rows", d.viewing(d.tableRows(leasesTable)))
	m.HandleFunc("GET /ui/lease", d.viewing(d.leasePage))
	m.HandleFunc("GET /ui/force-release", d.viewing(d.forceForm))
	m.HandleFunc("POST /ui/force-release", d.viewing(d.forceRelease))
	m.HandleFunc("GET /ui/elections", d.viewing(d.tablePage(electionsTable)))
	m.HandleFunc("GET /ui/elections/rows", d.viewing(d.tableRows(electionsTable)))
	m.HandleFunc("GET /ui/lease/timeline", d.viewing(d.timelinePart))
	m.HandleFunc("GET /ui/idempotency", d.viewing(d.idemPage))
	m.HandleFunc("GET /ui/queues", d.viewing(d.queuesPage))
	m.HandleFunc("GET /ui/queue", d.viewing(d.queuePage))
	m.HandleFunc("GET /ui/groups", d.viewing(d.groupsPage))
	m.HandleFunc("GET /ui/group", d.viewing(d.groupPage))
	m.HandleFunc("GET /ui/barriers", d.viewing(d.barriersPage))
	m.HandleFunc("GET /ui/cluster", d.viewing(d.tablePage(clusterTable)))
	m.HandleFunc("GET /ui/cluster/rows", d.viewing(d.tableRows(clusterTable)))
	m.HandleFunc("GET /ui/audit", d.viewing(d.auditPage))
	m.HandleFunc("GET /ui/charts", d.viewing(d.nodeWide(d.chartsPage)))
	m.HandleFunc("GET /ui/charts/data", d.viewing(d.chartsData))
	m.HandleFunc("GET /ui/events", d.viewing(d.events))
	m.HandleFunc("GET /ui/runbook", d.viewing(d.runbookPage))
	d.mux = m
}
