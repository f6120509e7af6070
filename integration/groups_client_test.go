package integration

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/internal/testutil"
)

// nextUpdate reads the next assignment update, failing the test after d.
func nextUpdate(t *testing.T, s *client.AssignmentStream, d time.Duration) client.AssignmentUpdate {
	t.Helper()
	select {
	case u, ok := <-s.Updates():
		if !ok {
			t.Fatalf("the assignment stream ended: %v", s.Err())
		}
		return u
	case <-time.After(d):
		t.Fatalf("no assignment update within %v", d)
	}
	return client.AssignmentUpdate{}
}

// The assignment stream of a member whose node is killed resumes on
// another node and goes on with the next change.
func TestAssignmentsResumeOnAnotherNode(t *testing.T) {
	cl := testcluster.Start(t, 3)
	leader := cl.WaitLeader(15 * time.Second)
	follower := (leader + 1) % 3
	// The stream starts on the leader (the client follows it), then has
	// the follower to move to.
	c := newTestClient(t, 0, cl.URL(leader), cl.URL(follower))
	admin := newTestClient(t, 0, cl.URL(follower), cl.URL((leader+2)%3))
	ctx := testutil.Context(t, 60*time.Second)
	if _, err := admin.CreateGroup(ctx, "g", 2); err != nil {
		t.Fatal(err)
	}
	a, err := c.Join(ctx, "g", "a", client.TTL(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	s := a.Assignments(ctx)
	added := 0
	for added < 2 {
		for _, ch := range nextUpdate(t, s, 10*time.Second).Changes {
			if ch.State == client.Added {
				added++
			}
		}
	}
	cl.Kill(leader)
	cl.WaitNewLeader(leader, 30*time.Second)
	b, err := admin.Join(ctx, "g", "b", client.TTL(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Leave(testutil.Context(t, 5*time.Second))
	for revoking := false; !revoking; {
		for _, ch := range nextUpdate(t, s, 30*time.Second).Changes {
			revoking = revoking || ch.State == client.Revoking
		}
	}
	a.Leave(testutil.Context(t, 5*time.Second))
}
