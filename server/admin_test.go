package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/server"
)

// withToken sends a bearer token with every request.
func withToken(token string) connect.ClientOption {
	return connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+token)
			return next(ctx, req)
		}
	}))
}

func adminClient(t testing.TB, n *testcluster.Node, opts ...connect.ClientOption) leaseholdv1connect.AdminClient {
	t.Helper()
	return leaseholdv1connect.NewAdminClient(httpClient(t), n.URL, opts...)
}

func forceRelease(c leaseholdv1connect.AdminClient, req *pb.ForceReleaseRequest) (*pb.ForceReleaseResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := c.ForceRelease(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

func locks(t testing.TB, c leaseholdv1connect.AdminClient, req *pb.LocksRequest) *pb.LocksResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := c.Locks(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatalf("locks %v: %v", req, err)
	}
	return res.Msg
}

// lockOf shows one resource (held or free).
func lockOf(t testing.TB, c leaseholdv1connect.AdminClient, resource string) *pb.Lock {
	t.Helper()
	r := locks(t, c, &pb.LocksRequest{Resource: resource})
	if len(r.Locks) != 1 || r.Locks[0].Resource != resource {
		t.Fatalf("locks for resource %q: %v", resource, r.Locks)
	}
	return r.Locks[0]
}

func auditLog(t testing.TB, c leaseholdv1connect.AdminClient, req *pb.AuditRequest) *pb.AuditResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := c.Audit(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatalf("audit: %v", err)
	}
	return res.Msg
}

func kvPut(c leaseholdv1connect.KVClient, key string, fence *pb.Fence) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	_, err := c.Put(ctx, connect.NewRequest(&pb.PutRequest{Key: key, Value: []byte("v"), Fence: fence}))
	return err
}

// An admin's forced release naming a lease that no longer holds the
// resource is refused, and the holder keeps it.
func TestForceReleaseStaleLeaseID(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c, ac := newClient(t, n), adminClient(t, n)
	const res = "adm/stale"

	old := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(time.Minute)})
	mustRelease(t, c, old)
	cur := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(time.Minute), Owner: "newer"})
	defer mustRelease(t, c, cur)

	_, err := forceRelease(ac, &pb.ForceReleaseRequest{Resource: res, LeaseId: old.Lease.Id, Reason: "stuck"})
	wantCode(t, err, connect.CodeFailedPrecondition, fmt.Sprintf("held by lease %d, not %d", cur.Lease.Id, old.Lease.Id))
	if l := lockOf(t, ac, res); l.LeaseId != cur.Lease.Id || l.Token != cur.Lease.Token {
		t.Fatalf("after a refused forced release: held by lease %d (token %d), want %d", l.LeaseId, l.Token, cur.Lease.Id)
	}
	if _, err := renew(c, cur.Lease.Id, cur.Secret); err != nil {
		t.Fatalf("the holder cannot renew after a refused forced release: %v", err)
	}
	if recs := auditLog(t, ac, &pb.AuditRequest{}).Records; len(recs) != 0 {
		t.Fatalf("a refused forced release left audit records: %v", recs)
	}

	_, err = forceRelease(ac, &pb.ForceReleaseRequest{Resource: "adm/free", LeaseId: 7, Reason: "stuck"})
	wantCode(t, err, connect.CodeNotFound, "not held")
}

// A forced release while the holder is still working: the audit log names
// the authenticated actor and the reason, the log has a WARN line without
// secrets, and the ex-holder's next fenced write is refused.
func TestForceReleaseWhileHolderWorks(t *testing.T) {
	t.Parallel()
	const adminTok, operTok, workerTok = "admin-token-0123456789", "operator-token-0123456789", "worker-token-0123456789"
	auth, err := server.NewAuthenticator(server.AuthFile{Tokens: []server.TokenEntry{
		{Name: "alice", SHA256: server.HashToken(adminTok), Role: "admin"},
		{Name: "olly", SHA256: server.HashToken(operTok), Role: "operator"},
		{Name: "wendy", SHA256: server.HashToken(workerTok), Role: "worker", Prefixes: []string{"adm/"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	n := testcluster.StartServerNode(t, func(c *server.Config) {
		c.Auth = auth
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	worker := newClient(t, n, withToken(workerTok))
	workerKV := leaseholdv1connect.NewKVClient(httpClient(t), n.URL, withToken(workerTok))
	admin, oper := adminClient(t, n, withToken(adminTok)), adminClient(t, n, withToken(operTok))
	const res = "adm/job"

	secret := newSecret(t)
	held := mustAcquire(t, worker, &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(30 * time.Second),
		Owner: "worker-1", Operation: "nightly", Secret: secret})
	fence := &pb.Fence{Resource: res, Token: held.Lease.Token}
	if err := kvPut(workerKV, "adm/job/out", fence); err != nil {
		t.Fatalf("the holder's fenced write: %v", err)
	}
	if _, err := renew(worker, held.Lease.Id, secret); err != nil { // still working
		t.Fatal(err)
	}

	_, err = forceRelease(oper, &pb.ForceReleaseRequest{Resource: res, LeaseId: held.Lease.Id, Reason: "stuck"})
	wantCode(t, err, connect.CodePermissionDenied)

	const reason = "holder stuck on a dead NFS mount, ticket OPS-42"
	req := &pb.ForceReleaseRequest{Resource: res, LeaseId: held.Lease.Id, Reason: reason, RequestId: "force-1"}
	out, err := forceRelease(admin, req)
	if err != nil {
		t.Fatalf("forced release: %v", err)
	}
	if out.Lease.GetId() != held.Lease.Id || out.Lease.GetToken() != held.Lease.Token {
		t.Fatalf("forced release ended %v, want lease %d", out.Lease, held.Lease.Id)
	}
	// A retry (lost reply) answers the same and acts once.
	if again, err := forceRelease(admin, req); err != nil || again.Lease.GetId() != held.Lease.Id {
		t.Fatalf("retried forced release: %v, %v", again, err)
	}

	recs := auditLog(t, oper, &pb.AuditRequest{Since: dur(time.Hour)}).Records
	if len(recs) != 1 {
		t.Fatalf("audit records: %v, want one", recs)
	}
	a := recs[0]
	if a.Actor != "alice" || a.Reason != reason || a.Action != "force-release" || a.Resource != res ||
		a.LeaseId != held.Lease.Id || a.Token != held.Lease.Token || a.Owner != "worker-1" || a.Operation != "nightly" {
		t.Fatalf("audit record %v", a)
	}
	if d := time.Since(a.Time.AsTime()); d < -time.Minute || d > time.Minute {
		t.Fatalf("audit record time %v is %v from now", a.Time.AsTime(), d)
	}

	// The ex-holder does not know yet and writes again: refused.
	err = kvPut(workerKV, "adm/job/out", fence)
	wantCode(t, err, connect.CodeAborted)
	if !errors.Is(api.FromConnect(err), leasehold.ErrStaleToken) {
		t.Fatalf("the ex-holder's fenced write: %v, want ErrStaleToken", err)
	}
	_, err = renew(worker, held.Lease.Id, secret)
	wantCode(t, err, connect.CodeNotFound)
	next := mustAcquire(t, worker, &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(30 * time.Second)})
	defer mustRelease(t, worker, next)
	if next.Lease.Token <= held.Lease.Token {
		t.Fatalf("next holder's token %d is not above the forced-out %d", next.Lease.Token, held.Lease.Token)
	}

	if got := counterValue(t, n, "leasehold_forced_releases_total", nil); got != 1 {
		t.Fatalf("leasehold_forced_releases_total = %v after one forced release and its retry, want 1", got)
	}
	text := logs.String()
	var warn string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "forced release:") {
			warn = line
		}
	}
	for _, want := range []string{"level=WARN", "actor=alice", reason, fmt.Sprintf("lease=%d", held.Lease.Id),
		fmt.Sprintf("token=%d", held.Lease.Token), "resource=" + res} {
		if !strings.Contains(warn, want) {
			t.Errorf("the forced release's log line %q lacks %q", warn, want)
		}
	}
	for _, s := range []string{secret, adminTok, operTok, workerTok} {
		if strings.Contains(text, s) {
			t.Errorf("the server log holds a secret or token %q", s)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Locks shows each field and marks an unrenewed lease overdue and a lease
// renewed without progress for 3 TTLs stale.
func TestLocksFieldsAndMarks(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c, ac := newClient(t, n), adminClient(t, n)

	start := time.Now()
	quiet := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"adm/locks/quiet", "adm/locks/quiet2"}, Ttl: dur(2 * time.Second),
		Owner: "quiet-owner", Operation: "import", Metadata: map[string]string{"host": "h1"}})
	busy := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"adm/locks/busy"}, Ttl: dur(10 * time.Second), Owner: "busy-owner"})
	defer mustRelease(t, c, busy)
	waited := make(chan error, 1)
	go func() {
		a, err := acquire(t, c, &pb.AcquireRequest{Resources: []string{"adm/locks/quiet"}, Ttl: dur(10 * time.Second),
			Wait: dur(15 * time.Second), Owner: "waiting-owner", Operation: "next"})
		if err == nil {
			err = release(c, a.Lease.Id, a.Secret)
		}
		waited <- err
	}()
	waitForWaiters(t, c, "adm/locks/quiet", 1)

	// Past half the TTL with no renewal: overdue. The busy lease renews.
	pause(time.Until(start.Add(1200 * time.Millisecond)))
	if _, err := c.Renew(ctxFor(t, callTimeout), connect.NewRequest(&pb.RenewRequest{
		LeaseId: busy.Lease.Id, Secret: busy.Secret, Progress: "rows 1-10"})); err != nil {
		t.Fatal(err)
	}
	r := locks(t, ac, &pb.LocksRequest{Prefix: "adm/locks/"})
	by := map[string]*pb.Lock{}
	for _, l := range r.Locks {
		by[l.Resource] = l
	}
	if len(r.Locks) != 3 || by["adm/locks/quiet"] == nil || by["adm/locks/quiet2"] == nil || by["adm/locks/busy"] == nil {
		t.Fatalf("locks under adm/locks/: %v", r.Locks)
	}
	q := by["adm/locks/quiet"]
	if q.LeaseId != quiet.Lease.Id || q.Token != quiet.Lease.Token || q.Owner != "quiet-owner" || q.Operation != "import" ||
		q.Metadata["host"] != "h1" || len(q.LeaseResources) != 2 || q.AcquiredAt == nil || q.RenewedAt != nil || q.RenewCount != 0 {
		t.Fatalf("quiet lock fields: %v", q)
	}
	if q.Ttl.AsDuration() != 2*time.Second || q.ExpiresIn == nil || q.ExpiresIn.AsDuration() >= time.Second || q.HeldFor.AsDuration() < time.Second {
		t.Fatalf("quiet lock timing: ttl %v, expires in %v, held for %v", q.Ttl.AsDuration(), q.ExpiresIn, q.HeldFor.AsDuration())
	}
	if !q.RenewalOverdue || q.ProgressStale {
		t.Fatalf("quiet lock marks: overdue %v, stale %v; want overdue only", q.RenewalOverdue, q.ProgressStale)
	}
	if q.Waiters != 1 || q.OldestWait == nil || q.OldestWait.AsDuration() < 500*time.Millisecond || len(q.WaiterList) != 0 {
		t.Fatalf("quiet lock waiters: %d, oldest %v, list %v (the list only comes with a resource)", q.Waiters, q.OldestWait, q.WaiterList)
	}
	if q2 := by["adm/locks/quiet2"]; q2.Waiters != 0 || q2.OldestWait != nil || !q2.RenewalOverdue {
		t.Fatalf("quiet2 lock: %v", q2)
	}
	b := by["adm/locks/busy"]
	if b.RenewalOverdue || b.ProgressStale || b.RenewCount != 1 || b.Progress != "rows 1-10" || b.ProgressAt == nil || b.RenewedAt == nil {
		t.Fatalf("busy lock: %v", b)
	}

	// One resource in full, with its waiter list.
	full := lockOf(t, ac, "adm/locks/quiet")
	if full.LeaseId != quiet.Lease.Id || len(full.WaiterList) != 1 {
		t.Fatalf("show adm/locks/quiet: %v", full)
	}
	if w := full.WaiterList[0]; w.Owner != "waiting-owner" || w.Operation != "next" || w.Wait.AsDuration() != 15*time.Second ||
		w.QueuedAt == nil || w.Waiting.AsDuration() < 500*time.Millisecond || len(w.Resources) != 1 {
		t.Fatalf("waiter: %v", w)
	}
	if free := lockOf(t, ac, "adm/locks/free"); free.LeaseId != 0 || free.Waiters != 0 || free.Owner != "" {
		t.Fatalf("a free resource: %v", free)
	}

	// The quiet lease expires and its waiter gets the resource.
	if err := <-waited; err != nil {
		t.Fatalf("the waiter: %v", err)
	}

	// Renewed without a note for more than 3 TTLs after the last one: stale.
	// (A TTL of a second leaves room for a slow commit on a loaded machine.)
	const ttl = time.Second
	st := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"adm/locks/stale"}, Ttl: dur(ttl)})
	renewWith := func(note string) {
		t.Helper()
		if _, err := c.Renew(ctxFor(t, callTimeout), connect.NewRequest(&pb.RenewRequest{
			LeaseId: st.Lease.Id, Secret: st.Secret, Progress: note})); err != nil {
			t.Fatalf("renew the stale-progress lease: %v", err)
		}
	}
	renewWith("step 1")
	noted := time.Now()
	for time.Since(noted) < 3*ttl+200*time.Millisecond {
		pause(100 * time.Millisecond)
		renewWith("")
	}
	s := lockOf(t, ac, "adm/locks/stale")
	if !s.ProgressStale || s.RenewalOverdue || s.Progress != "step 1" {
		t.Fatalf("stale lock: stale %v, overdue %v, progress %q", s.ProgressStale, s.RenewalOverdue, s.Progress)
	}
	renewWith("step 2")
	if s := lockOf(t, ac, "adm/locks/stale"); s.ProgressStale || s.Progress != "step 2" {
		t.Fatalf("after a new note: stale %v, progress %q", s.ProgressStale, s.Progress)
	}
	mustRelease(t, c, st)
}

func TestLocksPages(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c, ac := newClient(t, n), adminClient(t, n)
	var ids []uint64
	for i := range 3 {
		a := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{fmt.Sprintf("adm/page/%d", i)}, Ttl: dur(time.Minute)})
		defer mustRelease(t, c, a)
		ids = append(ids, a.Lease.Id)
	}
	other := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"adm/other"}, Ttl: dur(time.Minute)})
	defer mustRelease(t, c, other)

	p1 := locks(t, ac, &pb.LocksRequest{Prefix: "adm/page/", PageSize: 2})
	if len(p1.Locks) != 2 || p1.NextPageToken == "" || p1.Locks[0].LeaseId != ids[0] || p1.Locks[1].LeaseId != ids[1] {
		t.Fatalf("first page: %v (next %q)", p1.Locks, p1.NextPageToken)
	}
	p2 := locks(t, ac, &pb.LocksRequest{Prefix: "adm/page/", PageSize: 2, PageToken: p1.NextPageToken})
	if len(p2.Locks) != 1 || p2.NextPageToken != "" || p2.Locks[0].LeaseId != ids[2] {
		t.Fatalf("second page: %v (next %q)", p2.Locks, p2.NextPageToken)
	}
	if all := locks(t, ac, &pb.LocksRequest{}); len(all.Locks) != 4 {
		t.Fatalf("every lock: %v", all.Locks)
	}
}

func TestAdminValidation(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	ac := adminClient(t, n)
	ctx := ctxFor(t, callTimeout)
	force := []struct {
		name string
		req  *pb.ForceReleaseRequest
		want string
	}{
		{"no resource", &pb.ForceReleaseRequest{LeaseId: 1, Reason: "r"}, "resource must not be empty"},
		{"no lease", &pb.ForceReleaseRequest{Resource: "x", Reason: "r"}, "lease_id must be set"},
		{"no reason", &pb.ForceReleaseRequest{Resource: "x", LeaseId: 1}, "reason must say why"},
		{"long reason", &pb.ForceReleaseRequest{Resource: "x", LeaseId: 1, Reason: strings.Repeat("r", 513)}, "reason is 513 bytes long; the limit is 512"},
		{"control in reason", &pb.ForceReleaseRequest{Resource: "x", LeaseId: 1, Reason: "a\nb"}, "reason has a control"},
		{"long request id", &pb.ForceReleaseRequest{Resource: "x", LeaseId: 1, Reason: "r", RequestId: strings.Repeat("q", 65)}, "request_id"},
	}
	for _, tc := range force {
		_, err := ac.ForceRelease(ctx, connect.NewRequest(tc.req))
		if err == nil || connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("force release, %s: %v; want InvalidArgument mentioning %q", tc.name, err, tc.want)
		}
	}
	if _, err := ac.ForceRelease(ctx, connect.NewRequest(&pb.ForceReleaseRequest{Resource: "x", LeaseId: 1,
		Reason: strings.Repeat("r", 512)})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("a 512-byte reason: %v; want it accepted (NotFound: x is not held)", err)
	}
	lks := []struct {
		name string
		req  *pb.LocksRequest
		want string
	}{
		{"resource and prefix", &pb.LocksRequest{Resource: "x", Prefix: "y"}, "resource names one resource"},
		{"page size", &pb.LocksRequest{PageSize: 5000}, "page_size"},
		{"page token", &pb.LocksRequest{PageToken: "x"}, "page_token"},
		{"long prefix", &pb.LocksRequest{Prefix: strings.Repeat("p", 257)}, "prefix is 257 bytes"},
	}
	for _, tc := range lks {
		_, err := ac.Locks(ctx, connect.NewRequest(tc.req))
		if err == nil || connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("locks, %s: %v; want InvalidArgument mentioning %q", tc.name, err, tc.want)
		}
	}
	aud := []struct {
		name string
		req  *pb.AuditRequest
		want string
	}{
		{"negative since", &pb.AuditRequest{Since: dur(-time.Second)}, "since is -1s"},
		{"limit", &pb.AuditRequest{Limit: 1001}, "limit is 1001"},
		{"negative limit", &pb.AuditRequest{Limit: -1}, "limit is -1"},
	}
	for _, tc := range aud {
		_, err := ac.Audit(ctx, connect.NewRequest(tc.req))
		if err == nil || connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("audit, %s: %v; want InvalidArgument mentioning %q", tc.name, err, tc.want)
		}
	}
}

// The audit log keeps the newest records within the limit, and since
// filters by age.
func TestAuditSinceAndLimit(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c, ac := newClient(t, n), adminClient(t, n)
	for i := range 3 {
		res := fmt.Sprintf("adm/audit/%d", i)
		a := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(time.Minute)})
		if _, err := forceRelease(ac, &pb.ForceReleaseRequest{Resource: res, LeaseId: a.Lease.Id, Reason: fmt.Sprintf("r%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	all := auditLog(t, ac, &pb.AuditRequest{})
	if len(all.Records) != 3 || all.Truncated || all.Records[0].Reason != "r0" || all.Records[2].Reason != "r2" ||
		all.Records[0].Index >= all.Records[2].Index {
		t.Fatalf("every record: %v (truncated %v)", all.Records, all.Truncated)
	}
	newest := auditLog(t, ac, &pb.AuditRequest{Limit: 2})
	if len(newest.Records) != 2 || !newest.Truncated || newest.Records[0].Reason != "r1" || newest.Records[1].Reason != "r2" {
		t.Fatalf("limit 2: %v (truncated %v)", newest.Records, newest.Truncated)
	}
	pause(300 * time.Millisecond)
	if recent := auditLog(t, ac, &pb.AuditRequest{Since: dur(100 * time.Millisecond)}); len(recent.Records) != 0 {
		t.Fatalf("records from the last 100ms: %v", recent.Records)
	}
	if hour := auditLog(t, ac, &pb.AuditRequest{Since: dur(time.Hour)}); len(hour.Records) != 3 {
		t.Fatalf("records from the last hour: %v", hour.Records)
	}
}

// scrape reads /metrics over HTTP, as Prometheus does.
func scrape(t testing.TB, hc *http.Client, n *testcluster.Node) map[string]*dto.MetricFamily {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", res.StatusCode, err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return mfs
}

// series flattens leasehold's counters, gauges and histogram counts into
// "name{k=v,...}" -> value.
func series(mfs map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for name, mf := range mfs {
		if !strings.HasPrefix(name, "leasehold_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, lp.GetName()+"="+lp.GetValue())
			}
			sort.Strings(labels)
			key := name
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[name+"_count"] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// counterValue reads one series from the node's registry.
func counterValue(t testing.TB, n *testcluster.Node, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := n.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return 0
}

// TestMetricsScenario scrapes /metrics before and after a scripted
// scenario and checks that each counter moved by exactly what happened.
func TestMetricsScenario(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	hc := httpClient(t)
	c, ac := newClient(t, n), adminClient(t, n)
	kv := leaseholdv1connect.NewKVClient(hc, n.URL)
	before := series(scrape(t, hc, n))

	// 2 acquisitions granted, 1 refused (held).
	a := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"m/a"}, Ttl: dur(30 * time.Second)})
	_, err := acquire(t, c, &pb.AcquireRequest{Resources: []string{"m/a"}, Ttl: dur(30 * time.Second)})
	wantCode(t, err, connect.CodeAlreadyExists)
	// 1 renewal, 1 renewal failure (wrong secret).
	if _, err := renew(c, a.Lease.Id, a.Secret); err != nil {
		t.Fatal(err)
	}
	_, err = renew(c, a.Lease.Id, newSecret(t))
	wantCode(t, err, connect.CodeFailedPrecondition)
	// 1 expiry, then its holder's release finds it gone: work finished
	// after lease loss.
	b := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"m/b"}, Ttl: dur(200 * time.Millisecond)})
	eventually(t, 10*time.Second, "the unrenewed lease did not expire", func() bool {
		return counterValue(t, n, "leasehold_leases_ended_total", map[string]string{"reason": "expired"}) == 1
	})
	wantCode(t, release(c, b.Lease.Id, b.Secret), connect.CodeNotFound)
	// A fenced write that passes, 1 forced release, then the ex-holder's
	// fenced write: 1 fence rejection.
	fence := &pb.Fence{Resource: "m/a", Token: a.Lease.Token}
	if err := kvPut(kv, "m/a/data", fence); err != nil {
		t.Fatal(err)
	}
	if _, err := forceRelease(ac, &pb.ForceReleaseRequest{Resource: "m/a", LeaseId: a.Lease.Id, Reason: "scripted"}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, kvPut(kv, "m/a/data", fence), connect.CodeAborted)

	var after map[string]float64
	eventually(t, 5*time.Second, "raft did not apply every committed entry", func() bool {
		after = series(scrape(t, hc, n))
		return after["leasehold_raft_applied_lag"] == 0
	})
	want := map[string]float64{
		`leasehold_acquisitions_total{outcome=granted}`:     2,
		`leasehold_acquisitions_total{outcome=held}`:        1,
		`leasehold_acquire_wait_seconds_count`:              2,
		`leasehold_leases_granted_total`:                    2,
		`leasehold_renewals_total`:                          1,
		`leasehold_renewal_failures_total{code=not_holder}`: 1,
		`leasehold_leases_ended_total{reason=expired}`:      1,
		`leasehold_leases_ended_total{reason=forced}`:       1,
		`leasehold_forced_releases_total`:                   1,
		`leasehold_fence_rejections_total{op=put}`:          1,
		`leasehold_released_after_loss_total`:               1,
		`leasehold_leases_held`:                             0,
		`leasehold_waiters`:                                 0,
		`leasehold_raft_leader_changes_total`:               0, // it has led since before the scenario
		`leasehold_raft_term`:                               0,
		`leasehold_raft_applied_lag`:                        0,
		`leasehold_is_leader`:                               0,
		`leasehold_raft_commit_seconds_count`:               -1, // moved; checked below
		`leasehold_raft_commit_index`:                       -1,
		`leasehold_raft_applied_index`:                      -1,
		// The watch history keeps every event: 2 grants, the renewal,
		// the expiry, the put and the forced release.
		`leasehold_watch_history_events`: 6,
		// Every call, by its row of the procedure table and its code.
		`leasehold_requests_total{code=ok,procedure=Leases.Acquire}`:                2,
		`leasehold_requests_total{code=already_exists,procedure=Leases.Acquire}`:    1,
		`leasehold_requests_total{code=ok,procedure=Leases.Renew}`:                  1,
		`leasehold_requests_total{code=failed_precondition,procedure=Leases.Renew}`: 1,
		`leasehold_requests_total{code=not_found,procedure=Leases.Release}`:         1,
		`leasehold_requests_total{code=ok,procedure=KV.Put}`:                        1,
		`leasehold_requests_total{code=aborted,procedure=KV.Put}`:                   1,
		`leasehold_requests_total{code=ok,procedure=Admin.ForceRelease}`:            1,
	}
	for key, d := range want {
		got := after[key] - before[key]
		if d >= 0 && got != d {
			t.Errorf("%s moved by %v, want %v (before %v, after %v)", key, got, d, before[key], after[key])
		}
		if d < 0 && got <= 0 {
			t.Errorf("%s did not move (before %v, after %v)", key, before[key], after[key])
		}
	}
	// Every other leasehold series did not move.
	for key, v := range after {
		if _, listed := want[key]; !listed && v != before[key] {
			t.Errorf("%s moved by %v, which the scenario does not explain", key, v-before[key])
		}
	}
	if after["leasehold_raft_leader_changes_total"] != 1 || after["leasehold_raft_term"] < 1 || after["leasehold_is_leader"] != 1 {
		t.Errorf("raft health: leader changes %v, term %v, is leader %v; want one change, a term, leading",
			after["leasehold_raft_leader_changes_total"], after["leasehold_raft_term"], after["leasehold_is_leader"])
	}
	if after["leasehold_raft_commit_index"] != after["leasehold_raft_applied_index"] {
		t.Errorf("commit index %v, applied index %v with no lag", after["leasehold_raft_commit_index"], after["leasehold_raft_applied_index"])
	}
}
