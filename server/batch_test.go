package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/server"
)

func opAcquire(m *pb.AcquireRequest) *pb.BatchOp {
	return &pb.BatchOp{Op: &pb.BatchOp_Acquire{Acquire: m}}
}

func opRenew(m *pb.RenewRequest) *pb.BatchOp { return &pb.BatchOp{Op: &pb.BatchOp_Renew{Renew: m}} }

func opRelease(m *pb.ReleaseRequest) *pb.BatchOp {
	return &pb.BatchOp{Op: &pb.BatchOp_Release{Release: m}}
}

func batch(c leaseholdv1connect.LeasesClient, ops ...*pb.BatchOp) (*pb.BatchResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := c.Batch(ctx, connect.NewRequest(&pb.BatchRequest{Ops: ops}))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// mustBatch sends ops and checks there is one result for each.
func mustBatch(t testing.TB, c leaseholdv1connect.LeasesClient, ops ...*pb.BatchOp) []*pb.BatchResult {
	t.Helper()
	res, err := batch(c, ops...)
	if err != nil {
		t.Fatalf("batch of %d: %v", len(ops), err)
	}
	if len(res.GetResults()) != len(ops) {
		t.Fatalf("batch of %d: %d results", len(ops), len(res.GetResults()))
	}
	return res.GetResults()
}

// wantOpError fails t unless r is an error result with the Connect code
// name of leasehold code want (as a unary call of the same operation
// would fail) whose message contains every one of substrs.
func wantOpError(t testing.TB, r *pb.BatchResult, want leasehold.Code, substrs ...string) {
	t.Helper()
	e := r.GetError()
	if e == nil {
		t.Fatalf("result %v, want a %s error", r, want)
	}
	if name := connect.CodeOf(api.ToConnect(&leasehold.Error{Code: want})).String(); e.GetCode() != name {
		t.Fatalf("error %q (%s), want code %s", e.GetCode(), e.GetMessage(), name)
	}
	for _, s := range substrs {
		if !strings.Contains(e.GetMessage(), s) {
			t.Errorf("message %q does not mention %q", e.GetMessage(), s)
		}
	}
}

// lastIndex is the node's last raft log index.
func lastIndex(n *testcluster.Node) uint64 { return n.Cluster.LocalStatus().LastIndex }

// TestBatchMixed sends acquires, a renewal and releases, some of them
// failing, in one batch on a node of its own (so that nothing else writes
// to its log): every operation gets its own answer, in order, all of them
// from one log entry, and a retry of the batch gets the same answers.
func TestBatchMixed(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := newClient(t, n)

	a := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"mix/a"}, Ttl: dur(time.Minute), Secret: newSecret(t)})
	b := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"mix/b"}, Ttl: dur(time.Minute)})
	h := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"mix/c"}, Ttl: dur(time.Minute)})
	secretD := newSecret(t)
	ops := []*pb.BatchOp{
		opAcquire(&pb.AcquireRequest{Resources: []string{"mix/d"}, Ttl: dur(time.Minute), Owner: "d", Secret: secretD, RequestId: "mix-acq"}),
		opRenew(&pb.RenewRequest{LeaseId: a.Lease.GetId(), Secret: a.Secret, Progress: "half", RequestId: "mix-renew"}),
		opRelease(&pb.ReleaseRequest{LeaseId: b.Lease.GetId(), Secret: b.Secret, RequestId: "mix-release"}),
		opAcquire(&pb.AcquireRequest{Resources: []string{"mix/bad"}, Ttl: dur(time.Millisecond)}),
		opRelease(&pb.ReleaseRequest{LeaseId: h.Lease.GetId(), Secret: newSecret(t), RequestId: "mix-wrong"}),
		{},
		opAcquire(&pb.AcquireRequest{Resources: []string{"mix/a"}, RequestId: "mix-held", Secret: newSecret(t)}),
		opAcquire(&pb.AcquireRequest{Resources: []string{"mix/e"}, Ttl: dur(time.Minute), RequestId: "mix-nosecret"}),
	}
	hc := httpClient(t)
	counters := func() map[string]float64 { return series(scrape(t, hc, n)) }
	countsBefore := counters()
	before := lastIndex(n)
	rs := mustBatch(t, c, ops...)
	entry := lastIndex(n)
	if entry != before+1 {
		t.Fatalf("the batch moved the log from index %d to %d; want one entry", before, entry)
	}

	check := func(rs []*pb.BatchResult) (d *pb.AcquireResponse) {
		t.Helper()
		d = rs[0].GetAcquire()
		if d == nil || d.GetLease().GetResources()[0] != "mix/d" || d.GetSecret() != secretD || d.GetExpiresIn().AsDuration() <= 0 {
			t.Fatalf("result 0: %v, want the grant of mix/d with the caller's secret", rs[0])
		}
		r := rs[1].GetRenew()
		if r == nil || r.GetLease().GetId() != a.Lease.GetId() || r.GetLease().GetRenewCount() != 1 ||
			r.GetLease().GetProgress() != "half" || r.GetExpiresIn().AsDuration() <= 0 {
			t.Fatalf("result 1: %v, want lease %d renewed once with progress", rs[1], a.Lease.GetId())
		}
		if rel := rs[2].GetRelease(); rel == nil || rel.GetLease().GetId() != b.Lease.GetId() {
			t.Fatalf("result 2: %v, want lease %d released", rs[2], b.Lease.GetId())
		}
		wantOpError(t, rs[3], leasehold.CodeInvalid, "ttl")
		wantOpError(t, rs[4], leasehold.CodeNotHolder, "secret")
		wantOpError(t, rs[5], leasehold.CodeInvalid, "operation 5")
		wantOpError(t, rs[6], leasehold.CodeHeld, "mix/a")
		// A retry could not prove it is the same caller, nor renew or
		// release what it got, without a secret.
		wantOpError(t, rs[7], leasehold.CodeInvalid, "request_id", "secret")
		return d
	}
	d := check(rs)
	// The first grant in an entry gets the entry's index as its token.
	if d.GetLease().GetToken() != entry {
		t.Fatalf("token %d; the batch is entry %d", d.GetLease().GetToken(), entry)
	}
	countsAfter := counters()
	moved := map[string]float64{
		"leasehold_acquisitions_total{outcome=granted}": 1,
		"leasehold_acquisitions_total{outcome=invalid}": 2,
		"leasehold_acquisitions_total{outcome=held}":    1,
		"leasehold_acquire_wait_seconds_count":          1,
		"leasehold_renewals_total":                      1,
		"leasehold_leases_granted_total":                1,
	}
	for k, v := range countsAfter {
		if !strings.HasPrefix(k, "leasehold_acquisitions_total") && !strings.HasPrefix(k, "leasehold_acquire_wait_seconds_count") &&
			!strings.HasPrefix(k, "leasehold_renewal_failures_total") && !strings.HasPrefix(k, "leasehold_released_after_loss_total") {
			continue
		}
		if got := v - countsBefore[k]; got != moved[k] {
			t.Errorf("%s moved by %v, want %v", k, got, moved[k])
		}
	}
	for _, k := range []string{"leasehold_renewals_total", "leasehold_leases_granted_total"} {
		if got := countsAfter[k] - countsBefore[k]; got != moved[k] {
			t.Errorf("%s moved by %v, want %v", k, got, moved[k])
		}
	}
	if g := get(t, c, "mix/b"); g.GetHolder() != nil {
		t.Fatalf("mix/b still held after its release: %v", g.GetHolder())
	}
	if g := get(t, c, "mix/c"); g.GetHolder().GetId() != h.Lease.GetId() {
		t.Fatalf("mix/c after a release with the wrong secret: %v", g.GetHolder())
	}

	// The retry (same request IDs) gets the first answers: nothing acts
	// twice.
	rs = mustBatch(t, c, ops...)
	if got := lastIndex(n); got != entry+1 {
		t.Fatalf("the retry moved the log from index %d to %d; want one entry", entry, got)
	}
	d2 := check(rs)
	if d2.GetLease().GetId() != d.GetLease().GetId() || d2.GetLease().GetToken() != d.GetLease().GetToken() {
		t.Fatalf("the retry got lease %d token %d, want %d token %d",
			d2.GetLease().GetId(), d2.GetLease().GetToken(), d.GetLease().GetId(), d.GetLease().GetToken())
	}
	if _, err := renew(c, d.GetLease().GetId(), secretD); err != nil {
		t.Fatalf("renew the batch's grant with its secret: %v", err)
	}

	// The most operations a batch may hold all commit in one entry.
	ops = nil
	for i := range leasehold.MaxBatchOps {
		ops = append(ops, opAcquire(&pb.AcquireRequest{Resources: []string{fmt.Sprintf("max/%d", i)}, Ttl: dur(time.Minute)}))
	}
	before = lastIndex(n)
	rs = mustBatch(t, c, ops...)
	if got := lastIndex(n); got != before+1 {
		t.Fatalf("a batch of %d moved the log from index %d to %d; want one entry", len(ops), before, got)
	}
	for i, r := range rs {
		if r.GetAcquire().GetLease().GetToken() != before+1+uint64(i) {
			t.Fatalf("result %d: %v, want a grant with token %d", i, r, before+1+uint64(i))
		}
	}
}

// TestBatch runs the rest of the batch semantics against one node.
// Subtests use disjoint resource names, so they may share it.
func TestBatch(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := newClient(t, n)

	t.Run("Limits", func(t *testing.T) { t.Parallel(); testBatchLimits(t, c) })
	t.Run("QueuedThenReleasedThenAcquire", func(t *testing.T) { t.Parallel(); testBatchQueuedReleaseFirst(t, c) })
	t.Run("QueuedWithoutFollowUpIsWithdrawn", func(t *testing.T) { t.Parallel(); testBatchQueuedNoFollowUp(t, c) })
	t.Run("QueuedThenAcquireWaits", func(t *testing.T) { t.Parallel(); testBatchQueuedAcquireWaits(t, c) })
	t.Run("QueuedWaitElapses", func(t *testing.T) { t.Parallel(); testBatchQueuedWaitElapses(t, c) })
	t.Run("JSON", func(t *testing.T) { t.Parallel(); testBatchJSON(t, n) })
}

func testBatchLimits(t *testing.T, c leaseholdv1connect.LeasesClient) {
	_, err := batch(c)
	wantCode(t, err, connect.CodeInvalidArgument, "ops", "empty")

	var ops []*pb.BatchOp
	for i := range leasehold.MaxBatchOps + 1 {
		ops = append(ops, opAcquire(&pb.AcquireRequest{Resources: []string{fmt.Sprintf("lim/%d", i)}}))
	}
	_, err = batch(c, ops...)
	wantCode(t, err, connect.CodeInvalidArgument, "257", "256")
	if g := get(t, c, "lim/0"); g.GetHolder() != nil {
		t.Fatalf("lim/0 is held by %v after a refused batch", g.GetHolder())
	}

	// An acquire that may queue needs the caller's own request ID and
	// secret: a queued answer carries neither.
	held := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"lim/held"}, Ttl: dur(time.Minute)})
	rs := mustBatch(t, c,
		opAcquire(&pb.AcquireRequest{Resources: []string{"lim/held"}, Wait: dur(time.Minute), Secret: newSecret(t)}),
		opAcquire(&pb.AcquireRequest{Resources: []string{"lim/held"}, Wait: dur(time.Minute), RequestId: "lim-nosecret"}),
		opAcquire(&pb.AcquireRequest{Resources: []string{"lim/free"}, Ttl: dur(time.Minute)}),
	)
	wantOpError(t, rs[0], leasehold.CodeInvalid, "request_id")
	wantOpError(t, rs[1], leasehold.CodeInvalid, "secret")
	if rs[2].GetAcquire().GetLease() == nil {
		t.Fatalf("result 2: %v, want a grant", rs[2])
	}
	if g := get(t, c, "lim/held"); len(g.GetWaiters()) != 0 {
		t.Fatalf("waiters %v after refused batch acquires", g.GetWaiters())
	}
	mustRelease(t, c, held)
}

// queueBehind acquires res for a holder and puts req in line behind it
// with a batch.
func queueBehind(t *testing.T, c leaseholdv1connect.LeasesClient, res string, req *pb.AcquireRequest) *acquired {
	t.Helper()
	h := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(time.Minute), Owner: "holder"})
	rs := mustBatch(t, c, opAcquire(req))
	if !rs[0].GetQueued() {
		t.Fatalf("batch acquire of a held resource with a wait: %v, want queued", rs[0])
	}
	g := waitForWaiters(t, c, res, 1)
	if g.GetWaiters()[0].GetOwner() != req.GetOwner() {
		t.Fatalf("waiters %v, want the batch's acquire", g.GetWaiters())
	}
	return h
}

// checkReattached checks that got is the grant of req's own place in line.
func checkReattached(t *testing.T, c leaseholdv1connect.LeasesClient, req *pb.AcquireRequest, h, got *acquired) {
	t.Helper()
	if got.Secret != req.Secret || got.Lease.GetOwner() != req.Owner || got.Lease.GetToken() <= h.Lease.GetToken() {
		t.Fatalf("acquire after the batch: %v (secret %q), want the grant to the queued request", got.Lease, got.Secret)
	}
	g := get(t, c, req.Resources[0])
	if g.GetHolder().GetId() != got.Lease.GetId() || len(g.GetWaiters()) != 0 {
		t.Fatalf("after the grant: %v, want lease %d holding and nobody waiting", g, got.Lease.GetId())
	}
	if _, err := renew(c, got.Lease.GetId(), got.Secret); err != nil {
		t.Fatalf("renew the grant: %v", err)
	}
	mustRelease(t, c, got)
}

// A batch acquire that queued is granted when the holder releases, and
// the same request sent to Acquire (within the grace) returns that grant,
// which the withdrawal of the batch's unclaimed place then leaves alone.
func testBatchQueuedReleaseFirst(t *testing.T, c leaseholdv1connect.LeasesClient) {
	const res = "bq/release-first"
	req := &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(time.Minute), Wait: dur(30 * time.Second),
		Owner: "batched", RequestId: "bq-1", Secret: newSecret(t)}
	h := queueBehind(t, c, res, req)
	mustRelease(t, c, h)
	eventually(t, 5*time.Second, "the queued batch acquire was not granted", func() bool {
		return get(t, c, res).GetHolder().GetOwner() == "batched"
	})
	got := mustAcquire(t, c, req)
	pause(2500 * time.Millisecond) // past the server's withdraw grace
	checkReattached(t, c, req, h, got)
}

// A place in line that a batch took and nobody followed up with Acquire is
// withdrawn after the grace any caller who went away gets, instead of
// being granted later to nobody and held for its TTL.
func testBatchQueuedNoFollowUp(t *testing.T, c leaseholdv1connect.LeasesClient) {
	const res = "bq/no-follow-up"
	req := &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(time.Minute), Wait: dur(time.Minute),
		Owner: "batched", RequestId: "bq-5", Secret: newSecret(t)}
	h := queueBehind(t, c, res, req)
	eventually(t, 15*time.Second, "a batch's place in line nobody followed up was not withdrawn", func() bool {
		return len(get(t, c, res).GetWaiters()) == 0
	})
	mustRelease(t, c, h)
	if g := get(t, c, res); g.GetHolder() != nil {
		t.Fatalf("the resource went to %v after its holder released; nobody was waiting", g.GetHolder())
	}
	// A follow-up that comes after the grace is told the place is gone.
	_, err := acquire(t, c, req)
	wantCode(t, err, connect.CodeCanceled, "canceled")
}

// The same request sent to Acquire while the batch's acquire waits takes
// up its place (no second waiter) and blocks until the grant.
func testBatchQueuedAcquireWaits(t *testing.T, c leaseholdv1connect.LeasesClient) {
	const res = "bq/acquire-first"
	req := &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(time.Minute), Wait: dur(30 * time.Second),
		Owner: "batched", RequestId: "bq-2", Secret: newSecret(t)}
	h := queueBehind(t, c, res, req)
	type out struct {
		a   *acquired
		err error
	}
	done := make(chan out, 1)
	go func() {
		a, err := acquire(t, c, req)
		done <- out{a, err}
	}()
	select {
	case o := <-done:
		t.Fatalf("Acquire returned while the resource was held: %v %v", o.a, o.err)
	case <-time.After(500 * time.Millisecond):
	}
	if g := waitForWaiters(t, c, res, 1); g.GetWaiters()[0].GetOwner() != "batched" {
		t.Fatalf("waiters %v, want only the batch's acquire", g.GetWaiters())
	}
	mustRelease(t, c, h)
	var o out
	select {
	case o = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting Acquire was not granted after the release")
	}
	if o.err != nil {
		t.Fatalf("the waiting Acquire: %v", o.err)
	}
	checkReattached(t, c, req, h, o.a)
}

// A batch acquire's wait bound holds: the leader ends it, and the same
// request sent to Acquire learns so.
func testBatchQueuedWaitElapses(t *testing.T, c leaseholdv1connect.LeasesClient) {
	const res = "bq/elapse"
	req := &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(time.Minute), Wait: dur(300 * time.Millisecond),
		Owner: "batched", RequestId: "bq-3", Secret: newSecret(t)}
	h := queueBehind(t, c, res, req)
	_, err := acquire(t, c, req)
	wantCode(t, err, connect.CodeDeadlineExceeded, res)
	waitForWaiters(t, c, res, 0)
	if g := get(t, c, res); g.GetHolder().GetId() != h.Lease.GetId() {
		t.Fatalf("holder %v, want lease %d", g.GetHolder(), h.Lease.GetId())
	}
	mustRelease(t, c, h)
}

// Batch speaks JSON like every other method.
func testBatchJSON(t *testing.T, n *testcluster.Node) {
	status, out := postJSON(t, httpClient(t), n, leaseholdv1connect.LeasesBatchProcedure,
		`{"ops":[{"acquire":{"resources":["json/batch"],"ttl":"60s"}},{"renew":{"leaseId":"1"}},{}]}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %v", status, out)
	}
	results, ok := out["results"].([]any)
	if !ok || len(results) != 3 {
		t.Fatalf("results %v", out["results"])
	}
	acq := jsonObj(t, jsonObj(t, results[0], "results[0]")["acquire"], "results[0].acquire")
	jsonUint(t, jsonObj(t, acq["lease"], "lease")["token"], "token")
	if s, _ := acq["secret"].(string); !hex32.MatchString(s) {
		t.Fatalf("secret %v", acq["secret"])
	}
	for i := 1; i < 3; i++ {
		e := jsonObj(t, jsonObj(t, results[i], "result")["error"], "error")
		if e["code"] != "invalid_argument" || e["message"] == "" {
			t.Fatalf("results[%d]: %v, want an invalid error", i, results[i])
		}
	}
}

// A worker token's prefixes hold for every acquire of a batch.
func TestBatchAuth(t *testing.T) {
	t.Parallel()
	n := authNode(t)
	worker := newClient(t, n, withToken(workerToken))
	operator := newClient(t, n, withToken(operatorToken))

	_, err := batch(worker,
		opAcquire(&pb.AcquireRequest{Resources: []string{"jobs/ok"}, Ttl: dur(time.Minute)}),
		opAcquire(&pb.AcquireRequest{Resources: []string{"jobs/also", "billing/x"}, Ttl: dur(time.Minute)}),
	)
	wantCode(t, err, connect.CodePermissionDenied, "billing/x")
	if g := get(t, operator, "jobs/ok"); g.GetHolder() != nil {
		t.Fatalf("jobs/ok is held by %v after a refused batch", g.GetHolder())
	}
	_, err = batch(newClient(t, n), opAcquire(&pb.AcquireRequest{Resources: []string{"jobs/ok"}}))
	wantCode(t, err, connect.CodeUnauthenticated)

	rs := mustBatch(t, worker, opAcquire(&pb.AcquireRequest{Resources: []string{"jobs/ok"}, Ttl: dur(time.Minute)}))
	a := rs[0].GetAcquire()
	if a == nil {
		t.Fatalf("worker batch inside its prefix: %v", rs[0])
	}
	// Renewals and releases name leases, which their secrets protect.
	rs = mustBatch(t, worker,
		opRenew(&pb.RenewRequest{LeaseId: a.GetLease().GetId(), Secret: a.GetSecret()}),
		opRelease(&pb.ReleaseRequest{LeaseId: a.GetLease().GetId(), Secret: a.GetSecret()}),
	)
	if rs[0].GetRenew() == nil || rs[1].GetRelease() == nil {
		t.Fatalf("worker renew and release: %v", rs)
	}
}

// The acquires of a batch that pass validation count against the client's
// acquisition rate; invalid ones, and a batch with more acquires than the
// bucket holds, cost nothing.
func TestBatchRateLimit(t *testing.T) {
	t.Parallel()
	// Burst 1, one acquisition back every 5s: roomy on a loaded machine.
	n := testcluster.StartServerNode(t, func(c *server.Config) { c.AcquireRate = 0.2 })
	c := newClient(t, n)
	two := []*pb.BatchOp{
		opAcquire(&pb.AcquireRequest{Resources: []string{"rate/a"}, Ttl: dur(time.Minute)}),
		opAcquire(&pb.AcquireRequest{Resources: []string{"rate/b"}, Ttl: dur(time.Minute)}),
	}
	_, err := batch(c, two...)
	wantCode(t, err, connect.CodeResourceExhausted, "acquire_rate", "split it")
	// One valid acquire and two invalid ones: charged one, the whole burst.
	rs := mustBatch(t, c, two[0],
		opAcquire(&pb.AcquireRequest{Resources: []string{""}}),
		opAcquire(&pb.AcquireRequest{Resources: []string{"rate/c"}, Ttl: dur(0)}))
	a := rs[0].GetAcquire()
	if a == nil || rs[1].GetError() == nil || rs[2].GetError() == nil {
		t.Fatalf("results: %v", rs)
	}
	_, err = acquire(t, c, &pb.AcquireRequest{Resources: []string{"rate/one"}})
	wantCode(t, err, connect.CodeResourceExhausted, "acquire_rate")
	_, err = batch(c, opAcquire(&pb.AcquireRequest{Resources: []string{"rate/one"}}))
	wantCode(t, err, connect.CodeResourceExhausted, "acquire_rate")
	// A batch without acquires is not limited.
	if r := mustBatch(t, c, opRelease(&pb.ReleaseRequest{LeaseId: a.GetLease().GetId(), Secret: a.GetSecret()})); r[0].GetRelease() == nil {
		t.Fatalf("release: %v", r[0])
	}
}

// A caller that re-attached to its batch-queued place with Acquire and
// then went away gives the place up, as a caller of a plain waiting
// Acquire does.
func TestBatchQueuedReattachedCallerLeaves(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := newClient(t, n)
	const res = "bq/leave"
	req := &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(time.Minute), Wait: dur(time.Minute),
		Owner: "batched", RequestId: "bq-4", Secret: newSecret(t)}
	h := queueBehind(t, c, res, req)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := c.Acquire(ctx, connect.NewRequest(req))
	cancel()
	wantCode(t, err, connect.CodeDeadlineExceeded)
	eventually(t, 10*time.Second, "the place in line of a caller who left is not withdrawn", func() bool {
		return len(get(t, c, res).GetWaiters()) == 0
	})
	mustRelease(t, c, h)
	if g := get(t, c, res); g.GetHolder() != nil {
		t.Fatalf("the resource went to %v after its holder released; nobody was waiting", g.GetHolder())
	}
}

// Each failed operation of a batch carries the Connect code name that the
// same operation's own call fails with, the names the README's error table
// uses: one vocabulary.
func TestBatchErrorsSpeakConnectCodes(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := newClient(t, n)
	held := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"voc/held"}, Ttl: dur(time.Minute)})
	gone := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"voc/gone"}, Ttl: dur(time.Minute)})
	mustRelease(t, c, gone)
	cases := []struct {
		want  string
		op    *pb.BatchOp
		unary func() error
	}{
		{"invalid_argument", opAcquire(&pb.AcquireRequest{Resources: []string{"voc/x"}, Ttl: dur(time.Millisecond)}),
			func() error {
				_, err := acquire(t, c, &pb.AcquireRequest{Resources: []string{"voc/x"}, Ttl: dur(time.Millisecond)})
				return err
			}},
		{"already_exists", opAcquire(&pb.AcquireRequest{Resources: []string{"voc/held"}}),
			func() error { _, err := acquire(t, c, &pb.AcquireRequest{Resources: []string{"voc/held"}}); return err }},
		{"failed_precondition", opRenew(&pb.RenewRequest{LeaseId: held.Lease.GetId(), Secret: newSecret(t)}),
			func() error { _, err := renew(c, held.Lease.GetId(), newSecret(t)); return err }},
		{"not_found", opRelease(&pb.ReleaseRequest{LeaseId: gone.Lease.GetId(), Secret: gone.Secret}),
			func() error { return release(c, gone.Lease.GetId(), gone.Secret) }},
	}
	ops := make([]*pb.BatchOp, len(cases))
	for i, tc := range cases {
		ops[i] = tc.op
	}
	for i, r := range mustBatch(t, c, ops...) {
		tc := cases[i]
		unary := connect.CodeOf(tc.unary()).String()
		if got := r.GetError().GetCode(); got != tc.want || got != unary {
			t.Errorf("op %d: batch code %q, unary call %q; want %q for both", i, got, unary, tc.want)
		}
	}
}
