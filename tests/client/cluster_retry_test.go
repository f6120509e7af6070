package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testcluster"
)

// A TransferLeader (to a named node, or to none) and a RemoveServer whose
// replies are lost after the leader acted are retried and answer success:
// the retried transfer lands on the node that now leads (raft refuses a
// transfer to itself, an error the client would retry until its context
// ends; a transfer without a target would move the leadership on again),
// and the retried removal finds the node gone. Adding a voter again is a
// no-op, so its retry needs nothing. A node that was never a member
// is still refused as not found.
func TestClusterCallsRetriedAfterALostReplyAnswerAsTheFirst(t *testing.T) {
	t.Parallel()
	tc := testcluster.Start(t, 3)
	old := tc.WaitLeader(10 * time.Second)
	p := startResetProxy(t, tc.URL(old))
	// Membership calls are unary whatever the session mode; HTTP/1.1 lets
	// the proxy read which call a reply answers.
	c := newClient(t, client.Config{Session: client.SessionOff}, p.URL())
	ctx := ctxFor(t, 30*time.Second)
	if _, err := c.Members(ctx); err != nil { // a pooled connection to reset
		t.Fatal(err)
	}
	lose := func(what string, call func() error) {
		t.Helper()
		p.resets.Store(0)
		path := "/leasehold.v1.Cluster/" + what // the call's own reply, not that of a read before it
		p.dropReplyTo.Store(&path)
		start := time.Now()
		if err := call(); err != nil {
			t.Fatalf("%s whose reply was lost: %v after %v; want the retry answered as the first attempt", what, err, time.Since(start))
		}
		if p.resets.Load() == 0 {
			t.Fatalf("%s: the proxy reset nothing; the test proves nothing", what)
		}
	}

	to := (old + 1) % 3
	lose("TransferLeader", func() error { return c.TransferLeader(ctx, tc.ID(to)) })
	if now := tc.WaitNewLeader(old, 10*time.Second); now != to {
		t.Fatalf("node %d leads after the transfer to node %d", now, to)
	}

	// Without a target: the leadership moves once, to whichever node the
	// first attempt chose (seen as the reply is lost), not on again.
	first := -1
	between := func() { // on the proxy's goroutine: no t.Fatal here
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if i := tc.Leader(); i >= 0 && i != to {
				first = i
				return
			}
		}
	}
	p.whileLost.Store(&between)
	lose("TransferLeader", func() error { return c.TransferLeader(ctx, "") })
	p.whileLost.Store(nil)
	if now := tc.WaitLeader(10 * time.Second); first < 0 || now != first {
		t.Fatalf("node %d leads after a transfer without a target whose first attempt moved it to node %d", now, first)
	}

	gone := (first + 1) % 3
	lose("RemoveServer", func() error { return c.RemoveServer(ctx, tc.ID(gone)) })
	tc.MarkRemoved(gone)
	ms, err := c.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.ID == tc.ID(gone) {
			t.Fatalf("node %s is still a member: %+v", m.ID, ms)
		}
	}
	// Adding a voter again changes nothing, so its retry is safe as it is.
	stay := (first + 2) % 3
	lose("AddVoter", func() error { return c.AddVoter(ctx, tc.ID(stay), tc.RaftAddr(stay)) })
	if ms, err := c.Members(ctx); err != nil || len(ms) != 2 {
		t.Fatalf("members after adding a voter again: %+v %v, want the two", ms, err)
	}
	if err := c.RemoveServer(ctx, "never-a-member"); !errors.Is(err, leasehold.ErrNotFound) {
		t.Fatalf("removing a node that was never a member: %v, want not found", err)
	}
}
