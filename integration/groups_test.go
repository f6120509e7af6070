package integration

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/internal/testcluster"
)

// rawGroups is a bare Connect client of the Groups service for one node.
func rawGroups(t testing.TB, url string) leaseholdv1connect.GroupsClient {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return leaseholdv1connect.NewGroupsClient(&http.Client{Transport: tr}, url)
}

// onAny retries call on each url in turn until one answers, for at most
// d: a leader change makes calls fail with Unavailable for a while.
func onAny[T any](t testing.TB, d time.Duration, what string, urls []string, call func(leaseholdv1connect.GroupsClient) (T, error)) T {
	t.Helper()
	var out T
	clients := make([]leaseholdv1connect.GroupsClient, len(urls))
	for i, u := range urls {
		clients[i] = rawGroups(t, u)
	}
	try := 0
	waitFor(t, d, what, func() (bool, string) {
		r, err := call(clients[try%len(clients)])
		try++
		if err != nil {
			return false, err.Error()
		}
		out = r
		return true, ""
	})
	return out
}

// TestGroupRevocationSurvivesLeaderKill: a revocation is pending when the
// leader of a 3-node cluster is killed. After the takeover, neither half
// of it is lost: the member's acknowledgement of one partition, sent to
// the new leader, hands it over; the other, never acknowledged, ends the
// member's session once the new leader's own bound runs out (far before
// the session's TTL), and the next member gets it. A follower's
// assignment stream, served from its own history, shows the next member
// every grant, each after the previous owner gave it up.
func TestGroupRevocationSurvivesLeaderKill(t *testing.T) {
	c := testcluster.Start(t, 3)
	lead := c.WaitLeader(10 * time.Second)
	follower := (lead + 1) % 3
	survivors := []string{c.URL(follower), c.URL((lead + 2) % 3)}
	const bound = 3 * time.Second
	g := rawGroups(t, c.URL(lead))
	if _, err := g.Create(ctxFor(t, 10*time.Second), connect.NewRequest(&pb.GroupsCreateRequest{Group: "ha", Partitions: 4,
		RevokeTimeout: durationpb.New(bound)})); err != nil {
		t.Fatal(err)
	}
	join := func(member string) *pb.GroupsJoinResponse {
		res, err := g.Join(ctxFor(t, 10*time.Second), connect.NewRequest(&pb.GroupsJoinRequest{Group: "ha", Member: member,
			Ttl: durationpb.New(time.Minute)})) // a TTL far past the test's bounds
		if err != nil {
			t.Fatalf("join %s: %v", member, err)
		}
		return res.Msg
	}
	a := join("a")
	b := join("b")
	epochs := map[uint32]uint64{}
	for _, p := range a.Partitions {
		epochs[p.Partition] = p.Epoch
	}
	if err := c.WaitApplied(leaderIndex(t, c), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// b's stream, on a follower that survives.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := rawGroups(t, c.URL(follower)).Assignments(ctx, connect.NewRequest(&pb.GroupsAssignmentsRequest{
		Group: "ha", Member: "b", LeaseId: b.Lease.Id}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() || !stream.Msg().Initial || len(stream.Msg().Changes) != 0 {
		t.Fatalf("b's first message: %v (%v)", stream.Msg(), stream.Err())
	}

	t.Logf("killing the leader %s with partitions 2 and 3 being revoked from a", c.ID(lead))
	c.Kill(lead)
	c.WaitNewLeader(lead, 15*time.Second)
	onAny(t, 20*time.Second, "a acknowledges partition 2 after the takeover", survivors,
		func(g leaseholdv1connect.GroupsClient) (*pb.GroupsAckRevocationResponse, error) {
			r, err := g.AckRevocation(ctxFor(t, 5*time.Second), connect.NewRequest(&pb.GroupsAckRevocationRequest{Group: "ha",
				Member: "a", LeaseId: a.Lease.Id, Secret: a.Secret, Partition: 2, Epoch: epochs[2]}))
			if err != nil {
				return nil, err
			}
			return r.Msg, nil
		})
	tookOver := time.Now()

	// b sees partition 2, then (after the bound) partition 3 and a's
	// others, each with an epoch above a's.
	got := map[uint32]uint64{}
	deadline := time.AfterFunc(30*time.Second, cancel)
	defer deadline.Stop()
	for len(got) < 4 && stream.Receive() {
		for _, ch := range stream.Msg().Changes {
			if ch.State != pb.AssignmentState_ASSIGNMENT_STATE_ADDED {
				t.Fatalf("b saw %v", ch)
			}
			got[ch.Partition] = ch.Epoch
		}
	}
	if len(got) < 4 {
		t.Fatalf("b's stream ended with %v (%v)", got, stream.Err())
	}
	if waited := time.Since(tookOver); waited > bound+10*time.Second {
		t.Fatalf("the unacknowledged revocation took %v to resolve (bound %v)", waited, bound)
	}
	for p, e := range got {
		if e <= epochs[p] {
			t.Fatalf("partition %d: b's epoch %d is not above a's %d", p, e, epochs[p])
		}
	}
	res := onAny(t, 20*time.Second, "read the group", survivors, func(g leaseholdv1connect.GroupsClient) (*pb.GroupsGetResponse, error) {
		r, err := g.Get(ctxFor(t, 5*time.Second), connect.NewRequest(&pb.GroupsGetRequest{Group: "ha"}))
		if err != nil {
			return nil, err
		}
		return r.Msg, nil
	})
	var owners []string
	for _, p := range res.Partitions {
		owners = append(owners, p.Owner)
	}
	if strings.Join(owners, ",") != "b,b,b,b" || len(res.Members) != 1 || res.Group.PendingRevocations != 0 {
		t.Fatalf("after the takeover: owners %q, members %d, pending %d", owners, len(res.Members), res.Group.PendingRevocations)
	}
	t.Logf("resolved %v after the acknowledgement on the new leader", time.Since(tookOver).Round(time.Millisecond))
}

// TestGroupTenJoinsAtOnce: 10 members join a group of 1,024 partitions
// held by one member, at once, on a 3-node cluster; each join's answer
// comes after its entry committed, with the assignment computed in it.
// Afterwards every member's target share is 93 or 94 partitions and the
// first member's excess is being revoked. Logs how long the 10 joins took
// (median and max over 5 runs):
//
//	go test -run TestGroupTenJoinsAtOnce -v ./integration
func TestGroupTenJoinsAtOnce(t *testing.T) {
	c := testcluster.Start(t, 3)
	lead := c.WaitLeader(10 * time.Second)
	g := rawGroups(t, c.URL(lead))
	var took []time.Duration
	for run := range 5 {
		name := fmt.Sprint("big-", run)
		if _, err := g.Create(ctxFor(t, 10*time.Second), connect.NewRequest(&pb.GroupsCreateRequest{Group: name, Partitions: 1024})); err != nil {
			t.Fatal(err)
		}
		join := func(member string) error {
			_, err := g.Join(ctxFor(t, 10*time.Second), connect.NewRequest(&pb.GroupsJoinRequest{Group: name, Member: member,
				Ttl: durationpb.New(time.Minute)}))
			return err
		}
		if err := join("first"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		errs := make(chan error, 10)
		for i := range 10 {
			go func() { errs <- join(fmt.Sprint("m", i)) }()
		}
		for range 10 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		took = append(took, time.Since(start))
		res, err := g.Get(ctxFor(t, 10*time.Second), connect.NewRequest(&pb.GroupsGetRequest{Group: name}))
		if err != nil {
			t.Fatal(err)
		}
		share := map[string]int{}
		for _, p := range res.Msg.Partitions {
			target := p.Owner
			if p.Revoking {
				target = p.NextOwner
			}
			share[target]++
		}
		for m, n := range share {
			if n != 93 && n != 94 {
				t.Fatalf("run %d: %s's share is %d partitions: %v", run, m, n, share)
			}
		}
		if len(share) != 11 || res.Msg.Group.PendingRevocations < 900 {
			t.Fatalf("run %d: shares %v, %d pending", run, share, res.Msg.Group.PendingRevocations)
		}
	}
	t.Logf("10 joins into 1,024 partitions, answered: median %v, max %v (5 runs)", median(took).Round(time.Millisecond),
		slices.Max(took).Round(time.Millisecond))
}
