package server_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/api/leasehold"
)

// nextResults returns the next n answers, whole, by op id.
func (s *testStream) nextResults(n int) map[uint64]*pb.SessionResult {
	s.t.Helper()
	got := map[uint64]*pb.SessionResult{}
	for len(got) < n {
		m, err := s.st.Receive()
		if err != nil {
			s.t.Fatalf("receive after %d of %d answers: %v", len(got), n, err)
		}
		for _, r := range m.GetResults() {
			got[r.GetId()] = r
		}
	}
	return got
}

// Queue and idempotency calls on a stream are answered as their unary
// calls: a worker's call outside its prefixes is refused alone, with
// permission_denied, and the stream goes on to serve the ones inside.
func TestSessionCallsAuth(t *testing.T) {
	n := authNode(t)
	admin := leaseholdv1connect.NewQueuesClient(httpClient(t), n.URL, withToken(adminToken))
	for _, q := range []string{"jobs/q", "billing/q"} {
		createQueue(t, admin, q, nil)
	}
	w := openSession(t, n, workerToken)
	secret := newSecret(t)
	w.send([]*pb.SessionOp{
		{Id: 1, Call: &pb.SessionOp_QueueSend{QueueSend: &pb.QueuesSendRequest{Queue: "billing/q", Key: "k", Body: []byte("m")}}},
		{Id: 2, Call: &pb.SessionOp_IdemBegin{IdemBegin: &pb.IdempotencyBeginRequest{Key: "billing/pay", Fingerprint: []byte("f"), AttemptTtl: dur(time.Minute), Secret: newSecret(t)}}},
		{Id: 3, Call: &pb.SessionOp_QueueSend{QueueSend: &pb.QueuesSendRequest{Queue: "jobs/q", Key: "k", Body: []byte("m"), RequestId: newSecret(t)}}},
		{Id: 4, Call: &pb.SessionOp_IdemBegin{IdemBegin: &pb.IdempotencyBeginRequest{Key: "jobs/pay", Fingerprint: []byte("f"), AttemptTtl: dur(time.Minute), Secret: secret}}},
		{Id: 5, Call: &pb.SessionOp_QueueAck{QueueAck: &pb.QueuesAckRequest{Queue: "jobs/q", Sequence: 1, Token: 1}}},
	})
	got := w.nextResults(5)
	wantOpError(t, got[1].GetResult(), leasehold.CodePermission, `"billing/q"`)
	wantOpError(t, got[2].GetResult(), leasehold.CodePermission, `"billing/pay"`)
	if got[3].GetQueueSend().GetSequence() == 0 {
		t.Fatalf("worker send inside its prefix: %v", got[3])
	}
	b := got[4].GetIdemBegin()
	if b.GetState() != pb.IdemState_IDEM_STATE_STARTED || b.GetSecret() != secret {
		t.Fatalf("worker begin inside its prefix: %v", got[4])
	}
	// Validated as the unary Ack: a token never handed out is stale.
	wantOpError(t, got[5].GetResult(), leasehold.CodeStaleToken)

	w.send([]*pb.SessionOp{{Id: 6, Call: &pb.SessionOp_IdemComplete{IdemComplete: &pb.IdempotencyCompleteRequest{
		Key: "jobs/pay", Attempt: b.GetAttempt(), Secret: secret, Result: []byte("paid")}}}})
	if got = w.nextResults(1); got[6].GetIdemComplete() == nil {
		t.Fatalf("worker complete: %v", got[6])
	}
	idem := leaseholdv1connect.NewIdempotencyClient(httpClient(t), n.URL, withToken(workerToken))
	r, err := idem.Get(ctxFor(t, callTimeout), connect.NewRequest(&pb.IdempotencyGetRequest{Key: "jobs/pay"}))
	if err != nil || string(r.Msg.GetRecord().GetResult()) != "paid" {
		t.Fatalf("the completed key: %v, %v", r, err)
	}
}

// An op that sets both a lease op and a call is refused alone.
func TestSessionCallWithOpIsRefused(t *testing.T) {
	n := startNode(t)
	s := openSession(t, n, "")
	s.send([]*pb.SessionOp{{Id: 1, Op: opRelease(&pb.ReleaseRequest{LeaseId: 1, Secret: newSecret(t)}),
		Call: &pb.SessionOp_IdemAbandon{IdemAbandon: &pb.IdempotencyAbandonRequest{Key: "k", Attempt: 1, Secret: newSecret(t)}}}})
	wantOpError(t, s.nextResults(1)[1].GetResult(), leasehold.CodeInvalid, "sets both op and call")
}

// A Begin that waits for another attempt waits on the stream without
// holding up the ops behind it, and a cancel by its op id withdraws it.
func TestSessionWaitingBeginIsCanceledByID(t *testing.T) {
	n := startNode(t)
	s := openSession(t, n, "")
	begin := func(id uint64, wait time.Duration) *pb.SessionOp {
		return &pb.SessionOp{Id: id, Call: &pb.SessionOp_IdemBegin{IdemBegin: &pb.IdempotencyBeginRequest{
			Key: "k", Fingerprint: []byte("f"), AttemptTtl: dur(time.Minute), Wait: dur(wait), Secret: newSecret(t)}}}
	}
	s.send([]*pb.SessionOp{begin(1, 0)})
	if got := s.nextResults(1); got[1].GetIdemBegin().GetState() != pb.IdemState_IDEM_STATE_STARTED {
		t.Fatalf("first begin: %v", got[1])
	}
	s.send([]*pb.SessionOp{begin(2, 30*time.Second)})
	s.send([]*pb.SessionOp{{Id: 3, Call: &pb.SessionOp_QueueAck{QueueAck: &pb.QueuesAckRequest{Queue: "none", Sequence: 1, Token: 1}}}})
	if got := s.nextResults(1); got[3] == nil {
		t.Fatalf("the op behind the waiting begin was not answered first: %v", got)
	}
	s.send(nil, 2)
	wantOpError(t, s.nextResults(1)[2].GetResult(), leasehold.CodeCanceled)
}
