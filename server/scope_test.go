package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/server"
)

// Two callers without auth, each with its own secret, who use the same
// request IDs (say, derived from a job name): neither gets anything of the
// other's, and neither can end what the other got.
func TestRequestIDOfAnotherCaller(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := newClient(t, n)
	testForeignRequestID(t, c, c, c, "scope/a/", "scope/b/")
}

// With auth on, a worker token limited to other/ that sends the request ID
// of a jobs/ worker's acquire neither reads that lease nor ends it.
func TestRequestIDOfAnotherToken(t *testing.T) {
	t.Parallel()
	const intruderToken = "intruder-token-0123456789"
	auth, err := server.NewAuthenticator(server.AuthFile{Tokens: []server.TokenEntry{
		{Name: "ci-worker", SHA256: server.HashToken(workerToken), Role: "worker", Prefixes: []string{"jobs/"}},
		{Name: "mallory", SHA256: server.HashToken(intruderToken), Role: "worker", Prefixes: []string{"other/"}},
		{Name: "olga", SHA256: server.HashToken(operatorToken), Role: "operator"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	n := testcluster.StartServerNode(t, func(c *server.Config) { c.Auth = auth })
	victim := newClient(t, n, withToken(workerToken))
	intruder := newClient(t, n, withToken(intruderToken))
	operator := newClient(t, n, withToken(operatorToken))
	testForeignRequestID(t, victim, intruder, operator, "jobs/", "other/")
}

// testForeignRequestID has the victim hold a lease and wait for another
// (under prefix vp), both with request IDs that the intruder then sends
// for acquires of its own (under ip); reader may inspect both prefixes.
func testForeignRequestID(t *testing.T, victim, intruder, reader leaseholdv1connect.LeasesClient, vp, ip string) {
	// Reading: the intruder's acquire is answered as its own request.
	held := mustAcquire(t, victim, &pb.AcquireRequest{Resources: []string{vp + "held"}, Ttl: dur(time.Minute),
		Owner: "victim-owner", Operation: "victim-op", Metadata: map[string]string{"victim": "meta"},
		RequestId: "job-1", Secret: newSecret(t)})
	got := mustAcquire(t, intruder, &pb.AcquireRequest{Resources: []string{ip + "own"}, Ttl: dur(time.Minute),
		RequestId: "job-1", Secret: newSecret(t)})
	l := got.Lease
	if l.GetId() == held.Lease.GetId() || len(l.GetResources()) != 1 || l.GetResources()[0] != ip+"own" ||
		l.GetOwner() != "" || l.GetOperation() != "" || len(l.GetMetadata()) != 0 {
		t.Fatalf("the intruder sending the victim's request_id got %v; want a lease of its own on %s and nothing of lease %d",
			l, ip+"own", held.Lease.GetId())
	}

	// Ending: the victim waits in line under job-2. The intruder sends
	// job-2 for a place of its own, and goes away during the call.
	victimBlock := mustAcquire(t, victim, &pb.AcquireRequest{Resources: []string{vp + "line"}, Ttl: dur(time.Minute)})
	mustAcquire(t, intruder, &pb.AcquireRequest{Resources: []string{ip + "line"}, Ttl: dur(time.Minute)})
	type outcome struct {
		a   *acquired
		err error
	}
	done := make(chan outcome, 1)
	victimReq := &pb.AcquireRequest{Resources: []string{vp + "line"}, Ttl: dur(time.Minute), Wait: dur(time.Minute),
		Owner: "victim-owner", RequestId: "job-2", Secret: newSecret(t)}
	go func() {
		a, err := acquire(t, victim, victimReq)
		done <- outcome{a, err}
	}()
	waitForWaiters(t, reader, vp+"line", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := intruder.Acquire(ctx, connect.NewRequest(&pb.AcquireRequest{Resources: []string{ip + "line"},
		Ttl: dur(time.Minute), Wait: dur(time.Minute), RequestId: "job-2", Secret: newSecret(t)}))
	cancel()
	wantCode(t, err, connect.CodeDeadlineExceeded)
	// Past the grace, the intruder's withdrawal has been proposed; its own
	// place is gone, the victim's is not.
	pause(3 * time.Second)
	eventually(t, 10*time.Second, "the intruder's own place in line was not withdrawn", func() bool {
		return len(get(t, reader, ip+"line").GetWaiters()) == 0
	})
	select {
	case o := <-done:
		t.Fatalf("the victim's wait ended when the intruder went away: %v %v", o.a, o.err)
	default:
	}
	if ws := get(t, reader, vp+"line").GetWaiters(); len(ws) != 1 || ws[0].GetOwner() != "victim-owner" {
		t.Fatalf("waiters on %s: %v, want the victim's", vp+"line", ws)
	}
	mustRelease(t, victim, victimBlock)
	var o outcome
	select {
	case o = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the victim was not granted after the holder released")
	}
	if o.err != nil || o.a.Lease.GetOwner() != "victim-owner" {
		t.Fatalf("the victim's acquire: %v %v, want its grant", o.a, o.err)
	}
	if _, err := renew(victim, o.a.Lease.GetId(), victimReq.Secret); err != nil {
		t.Fatalf("the victim cannot renew its grant: %v", err)
	}
	if _, err := renew(victim, held.Lease.GetId(), held.Secret); err != nil {
		t.Fatalf("the victim's first lease was ended: %v", err)
	}
}

// A retry must repeat its request: the same request_id and secret with
// other resources or options is refused, and the refusal says nothing of
// the first request.
func TestRetryWithChangedRequest(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := newClient(t, n)
	secret := newSecret(t)
	first := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"changed/a"}, Ttl: dur(time.Minute),
		Owner: "first-owner", RequestId: "changed-1", Secret: secret})
	for name, req := range map[string]*pb.AcquireRequest{
		"resources": {Resources: []string{"changed/b"}, Ttl: dur(time.Minute), Owner: "first-owner"},
		"ttl":       {Resources: []string{"changed/a"}, Ttl: dur(2 * time.Minute), Owner: "first-owner"},
		"owner":     {Resources: []string{"changed/a"}, Ttl: dur(time.Minute), Owner: "other"},
		"wait":      {Resources: []string{"changed/a"}, Ttl: dur(time.Minute), Owner: "first-owner", Wait: dur(time.Second)},
	} {
		req.RequestId, req.Secret = "changed-1", secret
		_, err := acquire(t, c, req)
		wantCode(t, err, connect.CodeInvalidArgument, "changed-1", "different request")
		var ce *connect.Error
		if !errors.As(err, &ce) {
			t.Fatalf("%s: %v is not a connect error", name, err)
		}
		for _, told := range []string{"changed/a", "first-owner", "lease"} {
			if strings.Contains(ce.Message(), told) {
				t.Errorf("%s: the refusal %q tells of the first request (%q)", name, ce.Message(), told)
			}
		}
	}
	if g := get(t, c, "changed/b"); g.GetHolder() != nil {
		t.Fatalf("a refused retry took changed/b: %v", g.GetHolder())
	}
	again := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"changed/a"}, Ttl: dur(time.Minute),
		Owner: "first-owner", RequestId: "changed-1", Secret: secret})
	if again.Lease.GetId() != first.Lease.GetId() {
		t.Fatalf("the unchanged retry got lease %d, want %d", again.Lease.GetId(), first.Lease.GetId())
	}
}
