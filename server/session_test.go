package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/server"
)

// testStream is a raw session stream for a test, ended when it ends.
type testStream struct {
	t  *testing.T
	st *connect.BidiStreamForClient[pb.SessionRequest, pb.SessionResponse]
}

func openSession(t *testing.T, n *testcluster.Node, token string) *testStream {
	t.Helper()
	return openSessionOn(t, h2cClient(t), n, token)
}

// openSessionOn opens a stream on hc's connection.
func openSessionOn(t *testing.T, hc *http.Client, n *testcluster.Node, token string) *testStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	st := leaseholdv1connect.NewSessionsClient(hc, n.URL).Session(ctx)
	if token != "" {
		st.RequestHeader().Set("Authorization", "Bearer "+token)
	}
	t.Cleanup(func() { st.CloseRequest(); st.CloseResponse() })
	return &testStream{t: t, st: st}
}

func (s *testStream) send(ops []*pb.SessionOp, cancels ...uint64) {
	s.t.Helper()
	if err := s.st.Send(&pb.SessionRequest{Ops: ops, Cancel: cancels}); err != nil {
		s.t.Fatalf("send: %v", err)
	}
}

// next returns the next n answers, by op id, in the order they came.
func (s *testStream) next(n int) ([]uint64, map[uint64]*pb.BatchResult) {
	s.t.Helper()
	var order []uint64
	got := map[uint64]*pb.BatchResult{}
	for len(order) < n {
		m, err := s.st.Receive()
		if err != nil {
			s.t.Fatalf("receive after %d of %d answers: %v", len(order), n, err)
		}
		for _, r := range m.GetResults() {
			order = append(order, r.GetId())
			got[r.GetId()] = r.GetResult()
		}
	}
	return order, got
}

func sop(id uint64, op *pb.BatchOp) *pb.SessionOp { return &pb.SessionOp{Id: id, Op: op} }

// Answers come as ops complete: a renewal sent after a waiting acquire is
// answered first, and the acquire when the holder releases.
func TestSessionAnswersOutOfOrder(t *testing.T) {
	n := startNode(t)
	c := newClient(t, n)
	h := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"ooo"}, Ttl: dur(time.Minute)})
	s := openSession(t, n, "")
	s.send([]*pb.SessionOp{sop(1, opAcquire(&pb.AcquireRequest{Resources: []string{"ooo"}, Ttl: dur(time.Minute), Wait: dur(30 * time.Second)}))})
	eventually(t, 10*time.Second, "the waiter in line", func() bool { return len(get(t, c, "ooo").GetWaiters()) == 1 })
	s.send([]*pb.SessionOp{sop(2, opRenew(&pb.RenewRequest{LeaseId: h.Lease.GetId(), Secret: h.Secret}))})
	order, got := s.next(1)
	if order[0] != 2 || got[2].GetRenew() == nil {
		t.Fatalf("first answer %d: %v; want the renewal (2)", order[0], got[order[0]])
	}
	if _, err := c.Release(ctxFor(t, callTimeout), connect.NewRequest(&pb.ReleaseRequest{LeaseId: h.Lease.GetId(), Secret: h.Secret})); err != nil {
		t.Fatal(err)
	}
	order, got = s.next(1)
	if a := got[1].GetAcquire(); order[0] != 1 || a.GetLease().GetToken() <= h.Lease.GetToken() {
		t.Fatalf("answer %d: %v; want the acquire (1) granted with a token above %d", order[0], got[order[0]], h.Lease.GetToken())
	}
}

// A cancel withdraws a waiting acquire: it is answered canceled and
// leaves the line, and the release that follows grants it to nobody.
func TestSessionCancelWithdrawsTheWaiter(t *testing.T) {
	n := startNode(t)
	c := newClient(t, n)
	h := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"cancel"}, Ttl: dur(time.Minute)})
	s := openSession(t, n, "")
	s.send([]*pb.SessionOp{sop(7, opAcquire(&pb.AcquireRequest{Resources: []string{"cancel"}, Ttl: dur(time.Minute), Wait: dur(30 * time.Second)}))})
	eventually(t, 10*time.Second, "the waiter in line", func() bool { return len(get(t, c, "cancel").GetWaiters()) == 1 })
	s.send(nil, 7)
	_, got := s.next(1)
	wantOpError(t, got[7], leasehold.CodeCanceled)
	eventually(t, 10*time.Second, "the waiter withdrawn", func() bool { return len(get(t, c, "cancel").GetWaiters()) == 0 })
	if _, err := c.Release(ctxFor(t, callTimeout), connect.NewRequest(&pb.ReleaseRequest{LeaseId: h.Lease.GetId(), Secret: h.Secret})); err != nil {
		t.Fatal(err)
	}
	if g := get(t, c, "cancel"); g.GetHolder() != nil {
		t.Fatalf("the withdrawn waiter was granted: %v", g.GetHolder())
	}
}

// Bad ops and ops over the limits are refused one by one with their
// Connect codes and a message naming the limit; the stream goes on.
func TestSessionLimits(t *testing.T) {
	n := startNode(t)
	c := newClient(t, n)
	s := openSession(t, n, "")

	var many []*pb.SessionOp
	for i := range leasehold.MaxBatchOps + 1 {
		many = append(many, sop(uint64(i+1), opRelease(&pb.ReleaseRequest{LeaseId: 1, Secret: newSecret(t)})))
	}
	s.send(many)
	_, got := s.next(len(many))
	wantOpError(t, got[1], leasehold.CodeInvalid, "257 operations", "limit is 256")

	s.send([]*pb.SessionOp{sop(1, &pb.BatchOp{})})
	_, got = s.next(1)
	wantOpError(t, got[1], leasehold.CodeInvalid, "sets none of acquire, renew or release")

	// Waiters fill the stream's room for unanswered ops (1,000 waiters
	// at most per resource, so two resources).
	for _, r := range []string{"full/a", "full/b"} {
		mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{r}, Ttl: dur(time.Minute)})
	}
	id := uint64(100)
	for sent := 0; sent < leasehold.MaxSessionOps; {
		var ops []*pb.SessionOp
		for k := 0; k < leasehold.MaxBatchOps && sent < leasehold.MaxSessionOps; k++ {
			id++
			r := "full/a"
			if sent%2 == 1 {
				r = "full/b"
			}
			ops = append(ops, sop(id, opAcquire(&pb.AcquireRequest{Resources: []string{r}, Ttl: dur(time.Minute),
				Wait: dur(time.Minute), RequestId: newSecret(t), Secret: newSecret(t)})))
			sent++
		}
		s.send(ops)
	}
	eventually(t, 20*time.Second, "every waiter in line", func() bool {
		return len(get(t, c, "full/a").GetWaiters())+len(get(t, c, "full/b").GetWaiters()) == leasehold.MaxSessionOps
	})
	s.send([]*pb.SessionOp{sop(1, opRenew(&pb.RenewRequest{LeaseId: 1, Secret: newSecret(t)}))})
	_, got = s.next(1)
	wantOpError(t, got[1], leasehold.CodeLimit, "1024 unanswered ops", "limit 1024")

	s.send([]*pb.SessionOp{sop(101, opRenew(&pb.RenewRequest{LeaseId: 1, Secret: newSecret(t)}))})
	_, got = s.next(1)
	wantOpError(t, got[101], leasehold.CodeInvalid, "op id 101 is already used")
}

// Streams count against the node's connection caps, per caller.
func TestSessionStreamsPerCallerAreCapped(t *testing.T) {
	n := testcluster.StartServerNode(t, func(c *server.Config) { c.MaxConnsPerClient = 64 })
	hc := h2cClient(t) // one connection, many streams
	for range 64 {
		s := openSessionOn(t, hc, n, "")
		s.send([]*pb.SessionOp{sop(1, opRelease(&pb.ReleaseRequest{LeaseId: 1, Secret: newSecret(t)}))})
		s.next(1) // open, and its handler running
	}
	s := openSessionOn(t, hc, n, "")
	// The refusal may come before the message is written (Send then says
	// EOF); Receive has it.
	s.st.Send(&pb.SessionRequest{Ops: []*pb.SessionOp{sop(1, opRelease(&pb.ReleaseRequest{LeaseId: 1, Secret: newSecret(t)}))}})
	_, err := s.st.Receive()
	wantCode(t, err, connect.CodeResourceExhausted, "max_conns_per_client")
	if open, refused := metricValue(t, n, "leasehold_sessions"), metricValue(t, n, `leasehold_refused_total{limit="max_sessions"}`); open != 64 || refused != 1 {
		t.Fatalf("metrics: %d sessions open, %d refused; want 64 and 1", open, refused)
	}
}

// A stream with nothing unanswered that sends nothing is ended after the
// idle time; one with an op waiting is not.
func TestSessionIdleStreamEnds(t *testing.T) {
	n := testcluster.StartServerNode(t, func(c *server.Config) { c.SessionIdle = 300 * time.Millisecond })
	c := newClient(t, n)
	h := mustAcquire(t, c, &pb.AcquireRequest{Resources: []string{"idle"}, Ttl: dur(time.Minute)})
	busy, idle := openSession(t, n, ""), openSession(t, n, "")
	busy.send([]*pb.SessionOp{sop(1, opAcquire(&pb.AcquireRequest{Resources: []string{"idle"}, Ttl: dur(time.Minute), Wait: dur(30 * time.Second)}))})
	idle.send([]*pb.SessionOp{sop(1, opRelease(&pb.ReleaseRequest{LeaseId: 1, Secret: newSecret(t)}))})
	idle.next(1)
	start := time.Now()
	if _, err := idle.st.Receive(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle stream: %v, want its end (EOF)", err)
	}
	if time.Since(start) < 200*time.Millisecond {
		t.Fatalf("idle stream ended after %v", time.Since(start))
	}
	time.Sleep(time.Second) // three idle times: the busy stream stays
	if _, err := c.Release(ctxFor(t, callTimeout), connect.NewRequest(&pb.ReleaseRequest{LeaseId: h.Lease.GetId(), Secret: h.Secret})); err != nil {
		t.Fatal(err)
	}
	if _, got := busy.next(1); got[1].GetAcquire() == nil {
		t.Fatalf("the waiting stream's acquire: %v", got[1])
	}
}

// Roles and prefixes hold per op, as for unary calls.
func TestSessionAuth(t *testing.T) {
	n := authNode(t)
	s := openSession(t, n, "")
	s.st.Send(&pb.SessionRequest{Ops: []*pb.SessionOp{sop(1, opAcquire(&pb.AcquireRequest{Resources: []string{"jobs/x"}}))}})
	_, err := s.st.Receive()
	wantCode(t, err, connect.CodeUnauthenticated)

	w := openSession(t, n, workerToken)
	w.send([]*pb.SessionOp{
		sop(1, opAcquire(&pb.AcquireRequest{Resources: []string{"jobs/x"}, Ttl: dur(time.Minute)})),
		sop(2, opAcquire(&pb.AcquireRequest{Resources: []string{"billing/x"}, Ttl: dur(time.Minute)})),
	})
	_, got := w.next(2)
	if got[1].GetAcquire() == nil {
		t.Fatalf("worker acquire inside its prefix: %v", got[1])
	}
	wantOpError(t, got[2], leasehold.CodePermission, "billing/x")
	a := got[1].GetAcquire()
	w.send([]*pb.SessionOp{sop(3, opRelease(&pb.ReleaseRequest{LeaseId: a.GetLease().GetId(), Secret: a.GetSecret()}))})
	if _, got = w.next(1); got[3].GetRelease() == nil {
		t.Fatalf("worker release: %v", got[3])
	}
}

// A session's acquires count against its caller's acquisition rate, as
// unary calls do.
func TestSessionRateLimit(t *testing.T) {
	// Burst 1, one acquisition back every 5s: roomy on a loaded machine.
	n := testcluster.StartServerNode(t, func(c *server.Config) { c.AcquireRate = 0.2 })
	s := openSession(t, n, "")
	s.send([]*pb.SessionOp{
		sop(1, opAcquire(&pb.AcquireRequest{Resources: []string{"rate/a"}, Ttl: dur(time.Minute)})),
		sop(2, opAcquire(&pb.AcquireRequest{Resources: []string{"rate/b"}, Ttl: dur(time.Minute)})),
	})
	_, got := s.next(2)
	wantOpError(t, got[1], leasehold.CodeLimit, "acquire_rate")
	wantOpError(t, got[2], leasehold.CodeLimit, "acquire_rate")
	s.send([]*pb.SessionOp{sop(3, opAcquire(&pb.AcquireRequest{Resources: []string{"rate/a"}, Ttl: dur(time.Minute)}))})
	if _, got = s.next(1); got[3].GetAcquire() == nil {
		t.Fatalf("one acquire within the burst: %v", got[3])
	}
	_, err := acquire(t, newClient(t, n), &pb.AcquireRequest{Resources: []string{"rate/c"}})
	wantCode(t, err, connect.CodeResourceExhausted, "acquire_rate")
}
