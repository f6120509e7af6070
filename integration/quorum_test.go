package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"

	"github.com/leasehold/leasehold/internal/testcluster"
)

// TestNoQuorumFailsFast: with two of three nodes down, a request to the
// survivor (the old leader, which must notice it lost its quorum) fails with
// Unavailable within its bound instead of hanging or succeeding; FailClosed
// is an error, FailOpen a degraded lease with token 0. With a quorum back,
// the survivor serves again.
func TestNoQuorumFailsFast(t *testing.T) {
	const bound = 3 * time.Second
	const slack = 700 * time.Millisecond
	c := testcluster.Start(t, 3)
	s := c.WaitLeader(10 * time.Second)
	cl := newTestClient(t, time.Second, c.URL(s))
	held, err := cl.Acquire(ctxFor(t, 10*time.Second), "quorum/held", client.TTL(20*time.Second), client.ManualRenew())
	if err != nil {
		t.Fatal(err)
	}
	c.Kill((s + 1) % 3)
	c.Kill((s + 2) % 3)
	killed := time.Now()

	// The raw API: the server itself answers Unavailable, well within the
	// caller's bound.
	start := time.Now()
	_, err = rawLeases(t, c.URL(s)).Acquire(ctxFor(t, bound), connect.NewRequest(&pb.AcquireRequest{
		Resources: []string{"quorum/raw"}, Ttl: durationpb.New(5 * time.Second), RequestId: "quorum-raw-1",
		Secret: "00112233445566778899aabbccddeeff"}))
	took := time.Since(start)
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Errorf("raw acquire without a quorum: %v (after %v); want Unavailable", err, took)
	}
	if took > bound {
		t.Errorf("raw acquire without a quorum took %v", took)
	}
	t.Logf("raw acquire without a quorum: %v after %v (%v after the kills)", connect.CodeOf(err), took.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))

	// FailClosed (the default): an error that says Unavailable, within the
	// caller's 3s.
	start = time.Now()
	l, err := cl.Acquire(ctxFor(t, bound), "quorum/closed", client.TTL(5*time.Second), client.ManualRenew())
	took = time.Since(start)
	if l != nil {
		t.Errorf("FailClosed acquire without a quorum returned a lease (token %d, degraded %v)", l.Token(), l.Degraded())
	}
	if !errors.Is(err, leasehold.ErrUnavailable) {
		t.Errorf("FailClosed acquire without a quorum: %v; want an error matching leasehold.ErrUnavailable", err)
	}
	if took > bound+slack {
		t.Errorf("FailClosed acquire without a quorum took %v; its ctx allowed %v", took, bound)
	}
	t.Logf("FailClosed acquire: %v after %v", err, took.Round(time.Millisecond))

	// A held lease cannot be renewed.
	start = time.Now()
	err = held.Renew(ctxFor(t, time.Second))
	took = time.Since(start)
	if err == nil {
		t.Error("a renewal without a quorum succeeded")
	} else if !errors.Is(err, leasehold.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("renewal without a quorum: %v", err)
	}
	if took > bound+slack {
		t.Errorf("renewal without a quorum took %v", took)
	}

	// FailOpen: a degraded lease, token 0, within the bound.
	start = time.Now()
	l, err = cl.Acquire(ctxFor(t, bound), "quorum/open", client.TTL(5*time.Second), client.FailOpen(), client.ManualRenew())
	took = time.Since(start)
	if err != nil {
		t.Errorf("FailOpen acquire without a quorum: %v (after %v); want a degraded lease", err, took)
	} else {
		if !l.Degraded() || l.Token() != 0 {
			t.Errorf("FailOpen lease without a quorum: degraded %v, token %d; want degraded with token 0", l.Degraded(), l.Token())
		}
		if err := l.Release(ctxFor(t, time.Second)); err != nil {
			t.Errorf("release of a degraded lease: %v", err)
		}
	}
	if took > bound+slack {
		t.Errorf("FailOpen acquire without a quorum took %v", took)
	}
	t.Logf("FailOpen acquire: degraded lease after %v", took.Round(time.Millisecond))

	// With one node back there is a quorum again, and the survivor serves.
	c.Restart((s + 1) % 3)
	l, err = cl.Acquire(ctxFor(t, 20*time.Second), "quorum/back", client.TTL(5*time.Second), client.ManualRenew())
	if err != nil {
		t.Fatalf("acquire with the quorum back: %v", err)
	}
	if l.Token() <= held.Token() {
		t.Errorf("token %d after the outage is not above %d", l.Token(), held.Token())
	}
	if err := held.Renew(ctxFor(t, 10*time.Second)); err != nil && time.Now().Before(held.Deadline()) {
		t.Errorf("the lease held through the outage (TTL 20s) was lost: %v", err)
	}
}
