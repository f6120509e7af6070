package server_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// TestLeases runs the lease semantics against one real node. Subtests use
// disjoint resource names, so they may share it.
func TestLeases(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := newClient(t, n)

	t.Run("TokensIncreaseUnderContention", func(t *testing.T) {
		t.Parallel()
		testTokensIncrease(t, c, newClient(t, n))
	})
	t.Run("ExpiryHandsToWaiter", func(t *testing.T) { t.Parallel(); testExpiryHandsToWaiter(t, c) })
	t.Run("WrongSecret", func(t *testing.T) { t.Parallel(); testWrongSecret(t, c) })
	t.Run("CrossedWaitersBothComplete", func(t *testing.T) { t.Parallel(); testCrossedWaiters(t, c) })
	t.Run("RetriedAcquire", func(t *testing.T) { t.Parallel(); testRetriedAcquire(t, c) })
	t.Run("HeldWithoutWait", func(t *testing.T) { t.Parallel(); testHeldWithoutWait(t, c) })
	t.Run("WaitElapses", func(t *testing.T) { t.Parallel(); testWaitElapses(t, c) })
	t.Run("CanceledWaiterWithdraws", func(t *testing.T) { t.Parallel(); testCanceledWaiter(t, c) })
	t.Run("MaxHold", func(t *testing.T) { t.Parallel(); testMaxHold(t, c) })
	t.Run("LockDelay", func(t *testing.T) { t.Parallel(); testLockDelay(t, c) })
	t.Run("GetShowsWaitersInOrder", func(t *testing.T) { t.Parallel(); testWaitersInOrder(t, c) })
}

// Two clients take turns on one resource; the tokens they see, in grant
// order, strictly increase, and they never hold it at once.
func testTokensIncrease(t *testing.T, c1, c2 leaseholdv1connect.LeasesClient) {
	const res, rounds = "contend/x", 8
	var (
		mu     sync.Mutex
		tokens []uint64
		inside atomic.Int32
		wg     sync.WaitGroup
		errs   = make(chan error, 2*rounds)
	)
	deadline := time.Now().Add(30 * time.Second)
	for i, c := range []leaseholdv1connect.LeasesClient{c1, c2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds && time.Now().Before(deadline); r++ {
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				res, err := c.Acquire(ctx, connect.NewRequest(&pb.AcquireRequest{
					Resources: []string{res}, Ttl: dur(10 * time.Second), Wait: dur(10 * time.Second),
					Owner: fmt.Sprintf("client-%d", i),
				}))
				cancel()
				if err != nil {
					errs <- fmt.Errorf("client %d round %d: acquire: %w", i, r, err)
					return
				}
				if inside.Add(1) != 1 {
					errs <- fmt.Errorf("client %d round %d: two holders at once", i, r)
				}
				mu.Lock()
				tokens = append(tokens, res.Msg.GetLease().GetToken())
				mu.Unlock()
				time.Sleep(time.Millisecond) // hold briefly so the other client queues
				inside.Add(-1)
				if err := release(c, res.Msg.GetLease().GetId(), res.Msg.GetSecret()); err != nil {
					errs <- fmt.Errorf("client %d round %d: release: %w", i, r, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(tokens) != 2*rounds {
		t.Fatalf("%d grants, want %d", len(tokens), 2*rounds)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("token %d after %d: tokens %v do not strictly increase", tokens[i], tokens[i-1], tokens)
		}
	}
}

// A holder that stops renewing loses the lease after its TTL, not before,
// and the waiter gets it with a larger token.
func testExpiryHandsToWaiter(t *testing.T, c leaseholdv1connect.LeasesClient) {
	const res, ttl = "expire/x", 300 * time.Millisecond
	start := time.Now() // before the holder's request is sent
	h := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(ttl), Owner: "silent"})
	w := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(10 * time.Second), Wait: dur(5 * time.Second), Owner: "waiter"})
	if since := time.Since(start); since < ttl {
		t.Fatalf("the waiter got the resource %v after the holder's acquire was sent; its TTL is %v", since, ttl)
	}
	if w.Lease.GetToken() <= h.Lease.GetToken() {
		t.Fatalf("waiter token %d, holder token %d: want larger", w.Lease.GetToken(), h.Lease.GetToken())
	}
	_, err := renew(c, h.Lease.GetId(), h.Secret)
	wantCode(t, err, connect.CodeNotFound, fmt.Sprint(h.Lease.GetId()))
	err = release(c, h.Lease.GetId(), h.Secret)
	wantCode(t, err, connect.CodeNotFound)
	if g := get(t, c, res); g.GetHolder().GetId() != w.Lease.GetId() {
		t.Fatalf("holder %v, want the waiter's lease %d", g.GetHolder(), w.Lease.GetId())
	}
	mustRelease(t, c, w)
}

// Renew and release with a wrong secret fail as FailedPrecondition and
// leave the holder untouched.
func testWrongSecret(t *testing.T, c leaseholdv1connect.LeasesClient) {
	const res = "secret/x"
	a := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(10 * time.Second), Secret: newSecret(t)})
	wrong := newSecret(t)
	_, err := renew(c, a.Lease.GetId(), wrong)
	wantCode(t, err, connect.CodeFailedPrecondition, "secret")
	err = release(c, a.Lease.GetId(), wrong)
	wantCode(t, err, connect.CodeFailedPrecondition, "secret")

	g := get(t, c, res)
	if g.GetHolder().GetId() != a.Lease.GetId() || g.GetHolder().GetRenewCount() != 0 {
		t.Fatalf("after wrong-secret calls: holder %v, want lease %d with no renewals", g.GetHolder(), a.Lease.GetId())
	}
	r, err := renew(c, a.Lease.GetId(), a.Secret)
	if err != nil {
		t.Fatalf("renew with the right secret: %v", err)
	}
	if r.GetLease().GetRenewCount() != 1 || r.GetLease().GetToken() != a.Lease.GetToken() {
		t.Fatalf("renew: %v, want renew count 1 and the same token", r.GetLease())
	}
	mustRelease(t, c, a)
}

// Waiters for {A,B} and {B,A} queued behind holders of A and of B both
// complete: the queue is ordered globally, so neither waits on the other.
func testCrossedWaiters(t *testing.T, c leaseholdv1connect.LeasesClient) {
	const a, b = "cross/a", "cross/b"
	ha := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{a}, Ttl: dur(10 * time.Second)})
	hb := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{b}, Ttl: dur(10 * time.Second)})

	type out struct {
		name string
		a    *acquired
		err  error
	}
	results := make(chan out, 2)
	var wg sync.WaitGroup
	for _, rs := range [][]string{{a, b}, {b, a}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := acquire(t, c, &pb.AcquireRequest{Resources: rs, Ttl: dur(10 * time.Second), Wait: dur(5 * time.Second)})
			if err == nil {
				// Hold briefly, then let the other one have both.
				time.Sleep(20 * time.Millisecond)
				err = release(c, got.Lease.GetId(), got.Secret)
			}
			results <- out{fmt.Sprint(rs), got, err}
		}()
		if len(rs) > 0 && rs[0] == a {
			waitForWaiters(t, c, a, 1) // make the arrival order {A,B} then {B,A}
		}
	}
	waitForWaiters(t, c, b, 2)
	mustRelease(t, c, ha)
	mustRelease(t, c, hb)
	wg.Wait()
	close(results)
	var tokens []uint64
	for r := range results {
		if r.err != nil {
			t.Fatalf("waiter %s: %v", r.name, r.err)
		}
		if len(r.a.Lease.GetResources()) != 2 {
			t.Fatalf("waiter %s got %v", r.name, r.a.Lease.GetResources())
		}
		tokens = append(tokens, r.a.Lease.GetToken())
	}
	for _, tok := range tokens {
		if tok <= hb.Lease.GetToken() {
			t.Fatalf("waiter token %d not above the holders' %d", tok, hb.Lease.GetToken())
		}
	}
}

// A retried Acquire with the same request_id and secret returns the first
// answer: the same lease, not a second grant.
func testRetriedAcquire(t *testing.T, c leaseholdv1connect.LeasesClient) {
	const res = "retry/x"
	req := &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(10 * time.Second), RequestId: "retry-1", Secret: newSecret(t)}
	first := mustAcquire(t, c, req)
	again := mustAcquire(t, c, req)
	if again.Lease.GetId() != first.Lease.GetId() || again.Lease.GetToken() != first.Lease.GetToken() {
		t.Fatalf("retry returned lease %d token %d, want %d token %d",
			again.Lease.GetId(), again.Lease.GetToken(), first.Lease.GetId(), first.Lease.GetToken())
	}
	if again.Secret != req.Secret {
		t.Fatalf("retry returned secret %q, want the caller's", again.Secret)
	}
	// The same request id for a different kind of request is refused.
	ctx := ctxFor(t, callTimeout)
	_, err := c.Renew(ctx, connect.NewRequest(&pb.RenewRequest{LeaseId: first.Lease.GetId(), Secret: first.Secret, RequestId: "retry-1"}))
	wantCode(t, err, connect.CodeInvalidArgument, "request_id")
	mustRelease(t, c, first)

	// A request ID without a secret is refused: a node-made secret would
	// differ on the retry, which could then neither find the first grant
	// nor renew or release it.
	_, err = acquire(t, c, &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(10 * time.Second), RequestId: "retry-2"})
	wantCode(t, err, connect.CodeInvalidArgument, "request_id", "secret")
	if g := get(t, c, res); g.GetHolder() != nil {
		t.Fatalf("a refused acquire took %q: %v", res, g.GetHolder())
	}
}

func testHeldWithoutWait(t *testing.T, c leaseholdv1connect.LeasesClient) {
	const res = "held/x"
	a := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(10 * time.Second), Owner: "alice", Operation: "nightly"})
	_, err := acquire(t, c, &pb.AcquireRequest{Resources: []string{"held/free", res}})
	wantCode(t, err, connect.CodeAlreadyExists, `"held/x"`, "alice", "nightly")
	// All or nothing: the free resource was not taken.
	if g := get(t, c, "held/free"); g.GetHolder() != nil {
		t.Fatalf("held/free is held by %v after a refused multi-resource acquire", g.GetHolder())
	}
	mustRelease(t, c, a)
}

func testWaitElapses(t *testing.T, c leaseholdv1connect.LeasesClient) {
	const res, wait = "elapse/x", 300 * time.Millisecond
	a := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(10 * time.Second)})
	start := time.Now()
	_, err := acquire(t, c, &pb.AcquireRequest{Resources: []string{res}, Wait: dur(wait)})
	wantCode(t, err, connect.CodeDeadlineExceeded, res)
	if since := time.Since(start); since < wait {
		t.Fatalf("the wait ended after %v; it was %v", since, wait)
	}
	if g := get(t, c, res); len(g.GetWaiters()) != 0 || g.GetHolder().GetId() != a.Lease.GetId() {
		t.Fatalf("after the wait elapsed: %v", g)
	}
	mustRelease(t, c, a)
}

// A waiting Acquire whose client goes away withdraws from the queue, and
// the resource goes to the next waiter.
func testCanceledWaiter(t *testing.T, c leaseholdv1connect.LeasesClient) {
	const res = "cancel/x"
	h := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(10 * time.Second)})

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	gone := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctx, connect.NewRequest(&pb.AcquireRequest{
			Resources: []string{res}, Ttl: dur(10 * time.Second), Wait: dur(10 * time.Second), Owner: "quitter",
		}))
		gone <- err
	}()
	waitForWaiters(t, c, res, 1)

	next := make(chan error, 1)
	var nextLease atomic.Pointer[acquired]
	go func() {
		a, err := acquire(t, c, &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(10 * time.Second), Wait: dur(10 * time.Second), Owner: "patient"})
		nextLease.Store(a)
		next <- err
	}()
	g := waitForWaiters(t, c, res, 2)
	if g.GetWaiters()[0].GetOwner() != "quitter" || g.GetWaiters()[1].GetOwner() != "patient" {
		t.Fatalf("waiters %v, want quitter then patient", g.GetWaiters())
	}

	cancel()
	select {
	case err := <-gone:
		wantCode(t, err, connect.CodeCanceled)
	case <-time.After(5 * time.Second):
		t.Fatal("the canceled acquire did not return")
	}
	g = waitForWaiters(t, c, res, 1)
	if g.GetWaiters()[0].GetOwner() != "patient" {
		t.Fatalf("waiters after the cancel: %v, want only patient", g.GetWaiters())
	}

	mustRelease(t, c, h)
	select {
	case err := <-next:
		if err != nil {
			t.Fatalf("the next waiter: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the next waiter was not granted the resource")
	}
	a := nextLease.Load()
	if a.Lease.GetOwner() != "patient" || a.Lease.GetToken() <= h.Lease.GetToken() {
		t.Fatalf("next waiter got %v", a.Lease)
	}
	if g := get(t, c, res); g.GetHolder().GetId() != a.Lease.GetId() || len(g.GetWaiters()) != 0 {
		t.Fatalf("after the hand-off: %v", g)
	}
	mustRelease(t, c, a)
}

// max_hold ends a lease however often it is renewed.
func testMaxHold(t *testing.T, c leaseholdv1connect.LeasesClient) {
	const res, ttl, maxHold = "maxhold/x", 200 * time.Millisecond, 600 * time.Millisecond
	start := time.Now()
	a := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(ttl), MaxHold: dur(maxHold)})
	if got := a.Lease.GetMaxHold().AsDuration(); got != maxHold {
		t.Fatalf("lease max_hold %v, want %v", got, maxHold)
	}
	var (
		err      error
		renewals int
	)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		var r *pb.RenewResponse
		r, err = renew(c, a.Lease.GetId(), a.Secret)
		if err != nil {
			break
		}
		renewals++
		if left := r.GetExpiresIn().AsDuration(); left <= 0 || left > ttl {
			t.Fatalf("renewal %d: expires in %v, want (0, %v]", renewals, left, ttl)
		}
		time.Sleep(40 * time.Millisecond) // well inside the TTL
	}
	ended := time.Since(start)
	if err == nil {
		t.Fatalf("the lease was still renewable %v after it was acquired with max_hold %v", ended, maxHold)
	}
	if code := connect.CodeOf(err); code != connect.CodeResourceExhausted && code != connect.CodeNotFound {
		t.Fatalf("renew past max_hold: %v, want ResourceExhausted or NotFound", err)
	}
	if ended < maxHold {
		t.Fatalf("the lease ended %v after acquire was sent, before its max_hold %v", ended, maxHold)
	}
	if renewals < 3 {
		t.Errorf("only %d renewals succeeded before max_hold; the loop renews every 40ms", renewals)
	}
	eventually(t, 5*time.Second, "the lease past max_hold still holds the resource", func() bool {
		return get(t, c, res).GetHolder() == nil
	})
}

// lock_delay blocks a resource after an expiry, not after a clean release.
func testLockDelay(t *testing.T, c leaseholdv1connect.LeasesClient) {
	const (
		res   = "lockdelay/x"
		ttl   = 200 * time.Millisecond
		delay = 700 * time.Millisecond
	)
	// A clean release leaves no lock-delay.
	a := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(10 * time.Second), LockDelay: dur(delay)})
	mustRelease(t, c, a)
	if g := get(t, c, res); g.GetLockDelay() != nil {
		t.Fatalf("lock-delay %v after a clean release", g.GetLockDelay())
	}
	mustRelease(t, c, mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(10 * time.Second)}))
	sent := time.Now() // the lease cannot be granted, so cannot expire, before this
	b := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(ttl), LockDelay: dur(delay)})

	// Let it expire: in the same state the holder is gone and the delay set.
	var g *pb.GetResponse
	eventually(t, 5*time.Second, "the unrenewed lease did not expire", func() bool {
		g = get(t, c, res)
		return g.GetHolder() == nil
	})
	// The delay ends at expiry+delay, and expiry comes after the grant, so
	// until sent+ttl+delay it cannot have ended.
	blockedUntilAtLeast := sent.Add(ttl + delay)
	if g.GetLockDelay().AsDuration() != delay {
		if time.Now().Before(blockedUntilAtLeast) {
			t.Fatalf("after expiry: %v, want lock_delay %v", g, delay)
		}
		t.Logf("too slow to see the lock-delay: %v", g)
	}
	_, err := renew(c, b.Lease.GetId(), b.Secret)
	wantCode(t, err, connect.CodeNotFound)
	got, err := acquire(t, c, &pb.AcquireRequest{Resources: []string{res}})
	switch {
	case time.Now().Before(blockedUntilAtLeast):
		wantCode(t, err, connect.CodeAlreadyExists, res, "lock-delay")
	case err == nil:
		t.Logf("too slow to see the refusal during the lock-delay")
		mustRelease(t, c, got)
	}
	// A waiter gets it once the delay ends, not before.
	w := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(10 * time.Second), Wait: dur(5 * time.Second)})
	if since := time.Since(sent); since < ttl+delay {
		t.Fatalf("granted %v after the expiring lease's acquire was sent; ttl+lock_delay is %v", since, ttl+delay)
	}
	if w.Lease.GetToken() <= b.Lease.GetToken() {
		t.Fatalf("token %d after %d", w.Lease.GetToken(), b.Lease.GetToken())
	}
	if g := get(t, c, res); g.GetLockDelay() != nil {
		t.Fatalf("lock_delay %v still shown after it ended", g.GetLockDelay())
	}
	mustRelease(t, c, w)
}

// Get lists waiters in the order they will be served.
func testWaitersInOrder(t *testing.T, c leaseholdv1connect.LeasesClient) {
	const res = "order/x"
	h := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{res}, Ttl: dur(10 * time.Second)})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	owners := []string{"first", "second", "third"}
	for i, o := range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Acquire(ctx, connect.NewRequest(&pb.AcquireRequest{
				Resources: []string{res, fmt.Sprintf("order/own-%d", i)}, Wait: dur(10 * time.Second), Owner: o, Operation: "op-" + o,
			}))
		}()
		waitForWaiters(t, c, res, i+1)
	}
	g := get(t, c, res)
	for i, w := range g.GetWaiters() {
		if w.GetOwner() != owners[i] || w.GetOperation() != "op-"+owners[i] || w.GetWait().AsDuration() != 10*time.Second {
			t.Fatalf("waiter %d is %v, want owner %s", i, w, owners[i])
		}
		if len(w.GetResources()) != 2 || w.GetQueuedAt() == nil {
			t.Fatalf("waiter %d: %v", i, w)
		}
	}
	if g.GetHolder().GetId() != h.Lease.GetId() {
		t.Fatalf("holder %v", g.GetHolder())
	}
	cancel()
	wg.Wait()
	waitForWaiters(t, c, res, 0)
	mustRelease(t, c, h)
}

// TestList pages and filters by prefix on its own node, so it sees only its
// own leases.
func TestList(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := newClient(t, n)
	ids := map[uint64]bool{}
	for i := range 5 {
		a := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{fmt.Sprintf("jobs/%d", i)}, Ttl: dur(time.Minute)})
		ids[a.Lease.GetId()] = true
	}
	for i := range 2 {
		mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{fmt.Sprintf("other/%d", i)}, Ttl: dur(time.Minute)})
	}
	// A lease with several resources matches if any of them does.
	multi := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"zz/1", "mixed/jobs"}, Ttl: dur(time.Minute)})

	list := func(prefix string, size int32) (pages [][]*pb.Lease) {
		t.Helper()
		token := ""
		for range 20 {
			ctx := ctxFor(t, callTimeout)
			res, err := c.List(ctx, connect.NewRequest(&pb.ListRequest{Prefix: prefix, PageSize: size, PageToken: token}))
			if err != nil {
				t.Fatalf("list %q: %v", prefix, err)
			}
			pages = append(pages, res.Msg.GetLeases())
			if token = res.Msg.GetNextPageToken(); token == "" {
				return pages
			}
		}
		t.Fatalf("list %q did not end after 20 pages", prefix)
		return nil
	}

	pages := list("jobs/", 2)
	if len(pages) != 3 || len(pages[0]) != 2 || len(pages[1]) != 2 || len(pages[2]) != 1 {
		t.Fatalf("page sizes %v, want 2,2,1", pageSizes(pages))
	}
	seen := map[uint64]int{}
	var last uint64
	for _, p := range pages {
		for _, l := range p {
			seen[l.GetId()]++
			if l.GetId() <= last {
				t.Fatalf("lease %d after %d: not in id order", l.GetId(), last)
			}
			last = l.GetId()
		}
	}
	for id := range ids {
		if seen[id] != 1 {
			t.Fatalf("lease %d seen %d times", id, seen[id])
		}
	}
	if len(seen) != 5 {
		t.Fatalf("saw %d leases under jobs/, want 5", len(seen))
	}

	// Exactly two full pages: the second says it is the last.
	if pages := list("other/", 1); len(pages) != 2 || len(pages[1]) != 1 {
		t.Fatalf("other/ page sizes %v, want 1,1", pageSizes(pages))
	}
	if pages := list("mixed/", 0); len(pages) != 1 || len(pages[0]) != 1 || pages[0][0].GetId() != multi.Lease.GetId() {
		t.Fatalf("mixed/: %v", pages)
	}
	if pages := list("", 0); len(pages) != 1 || len(pages[0]) != 8 {
		t.Fatalf("everything with the default page size: page sizes %v, want 8", pageSizes(pages))
	}
	if pages := list("nothing/", 0); len(pages) != 1 || len(pages[0]) != 0 {
		t.Fatalf("nothing/: %v", pages)
	}
	for _, l := range list("", 1000)[0] {
		if l.GetExpiresIn() == nil || l.GetToken() == 0 {
			t.Fatalf("listed lease %v: want a token and expires_in (this node leads)", l)
		}
	}
}

func pageSizes(pages [][]*pb.Lease) []int {
	var out []int
	for _, p := range pages {
		out = append(out, len(p))
	}
	return out
}
