package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

func campaign(t testing.TB, c leaseholdv1connect.ElectionsClient, req *pb.CampaignRequest) (*pb.CampaignResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout+req.GetWait().AsDuration())
	defer cancel()
	res, err := c.Campaign(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// TestElections runs an election through its handlers on a real node:
// the first candidate leads, the second waits in line and leads on the
// first's resignation with a larger token, Proclaim changes the value
// only for the leader, and bad input is refused with InvalidArgument.
func TestElections(t *testing.T) {
	n := startNode(t)
	c := leaseholdv1connect.NewElectionsClient(httpClient(t), n.URL)
	leases := newClient(t, n)

	first, err := campaign(t, c, &pb.CampaignRequest{Election: "e/db", Value: "10.0.0.1:5432", Ttl: dur(30 * time.Second)})
	if err != nil {
		t.Fatalf("first campaign: %v", err)
	}
	leader := func() *pb.Election {
		t.Helper()
		res, err := c.Leader(ctxFor(t, callTimeout), connect.NewRequest(&pb.LeaderRequest{Election: "e/db"}))
		if err != nil {
			t.Fatalf("leader: %v", err)
		}
		return res.Msg.Election
	}
	if e := leader(); e.Value != "10.0.0.1:5432" || e.Token != first.Lease.Token || e.LeaseId != first.Lease.Id || e.Since == nil {
		t.Fatalf("leader after the first campaign: %v; want value 10.0.0.1:5432, token %d", e, first.Lease.Token)
	}

	// The second candidate waits in line.
	type result struct {
		res *pb.CampaignResponse
		err error
	}
	second := make(chan result, 1)
	go func() {
		r, err := campaign(t, c, &pb.CampaignRequest{Election: "e/db", Value: "10.0.0.2:5432", Ttl: dur(30 * time.Second), Wait: dur(time.Minute)})
		second <- result{r, err}
	}()
	deadline := time.Now().Add(callTimeout)
	for leader().Candidates != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the second candidate never queued")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Proclaim: the leader may, the waiting candidate (no lease) and a
	// wrong secret may not.
	if _, err := c.Proclaim(ctxFor(t, callTimeout), connect.NewRequest(&pb.ProclaimRequest{
		LeaseId: first.Lease.Id, Secret: first.Secret, Value: "10.0.0.1:6432"})); err != nil {
		t.Fatalf("proclaim by the leader: %v", err)
	}
	if e := leader(); e.Value != "10.0.0.1:6432" || e.Token != first.Lease.Token {
		t.Fatalf("after proclaim: %v; want value 10.0.0.1:6432 and the same token %d", e, first.Lease.Token)
	}
	_, err = c.Proclaim(ctxFor(t, callTimeout), connect.NewRequest(&pb.ProclaimRequest{
		LeaseId: first.Lease.Id, Secret: newSecret(t), Value: "usurper"}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("proclaim with another secret: %v; want failed_precondition", err)
	}
	// A lock's holder is no leader.
	lock := mustAcquire(t, leases, &pb.AcquireRequest{Resources: []string{"lock/x"}})
	_, err = c.Proclaim(ctxFor(t, callTimeout), connect.NewRequest(&pb.ProclaimRequest{
		LeaseId: lock.Lease.Id, Secret: lock.Secret, Value: "v"}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("proclaim with a lock's lease: %v; want invalid_argument", err)
	}
	// A lock's name is no election.
	_, err = campaign(t, c, &pb.CampaignRequest{Election: "lock/x"})
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("campaign for a lock's name: %v; want invalid_argument", err)
	}

	// Resign hands leadership to the next in line, with a larger token.
	if _, err := c.Resign(ctxFor(t, callTimeout), connect.NewRequest(&pb.ResignRequest{
		LeaseId: first.Lease.Id, Secret: first.Secret})); err != nil {
		t.Fatalf("resign: %v", err)
	}
	var next result
	select {
	case next = <-second:
	case <-time.After(callTimeout):
		t.Fatal("the second candidate did not lead after the first resigned")
	}
	if next.err != nil {
		t.Fatalf("second campaign: %v", next.err)
	}
	if next.res.Lease.Token <= first.Lease.Token {
		t.Fatalf("second term's token %d is not above the first's %d", next.res.Lease.Token, first.Lease.Token)
	}
	if e := leader(); e.Value != "10.0.0.2:5432" || e.Token != next.res.Lease.Token || e.Candidates != 0 {
		t.Fatalf("leader after the resignation: %v", e)
	}
	// The resigned leader can neither proclaim nor resign again.
	_, err = c.Proclaim(ctxFor(t, callTimeout), connect.NewRequest(&pb.ProclaimRequest{
		LeaseId: first.Lease.Id, Secret: first.Secret, Value: "late"}))
	if code := connect.CodeOf(err); code != connect.CodeNotFound && code != connect.CodeFailedPrecondition {
		t.Fatalf("proclaim after resigning: %v; want not_found or failed_precondition", err)
	}

	// List shows the election.
	list, err := c.List(ctxFor(t, callTimeout), connect.NewRequest(&pb.ElectionsListRequest{Prefix: "e/"}))
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(list.Msg.Elections) != 1 || list.Msg.Elections[0].Name != "e/db" || list.Msg.Elections[0].Value != "10.0.0.2:5432" {
		t.Fatalf("list: %v", list.Msg.Elections)
	}
	_, err = c.Leader(ctxFor(t, callTimeout), connect.NewRequest(&pb.LeaderRequest{Election: "e/none"}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("leader of an unknown election: %v; want not_found", err)
	}

	// The metrics count it: two campaigns led, three changes of leader
	// (first, proclaim, second), one election.
	for series, want := range map[string]int64{
		`leasehold_campaigns_total{outcome="leading"}`: 2,
		`leasehold_election_leader_changes_total`:      3,
		`leasehold_elections`:                          1,
		`leasehold_election_candidates`:                0,
	} {
		if got := metricValue(t, n, series); got != want {
			t.Errorf("%s = %d, want %d", series, got, want)
		}
	}
}

// TestElectionsInvalid: bad input is refused at the edge with
// InvalidArgument and a message naming the field.
func TestElectionsInvalid(t *testing.T) {
	n := startNode(t)
	c := leaseholdv1connect.NewElectionsClient(httpClient(t), n.URL)
	big := strings.Repeat("v", 4<<10+1)
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"campaign without a name", func() error {
			_, err := campaign(t, c, &pb.CampaignRequest{Value: "v"})
			return err
		}, "election"},
		{"campaign with a value too long", func() error {
			_, err := campaign(t, c, &pb.CampaignRequest{Election: "e", Value: big})
			return err
		}, "value is 4097 bytes"},
		{"campaign with a ttl too short", func() error {
			_, err := campaign(t, c, &pb.CampaignRequest{Election: "e", Ttl: dur(time.Millisecond)})
			return err
		}, "ttl"},
		{"campaign with a wait too long", func() error {
			_, err := campaign(t, c, &pb.CampaignRequest{Election: "e", Wait: dur(2 * time.Hour)})
			return err
		}, "wait"},
		{"proclaim without a lease", func() error {
			_, err := c.Proclaim(ctxFor(t, callTimeout), connect.NewRequest(&pb.ProclaimRequest{Secret: newSecret(t)}))
			return err
		}, "lease_id"},
		{"proclaim with a bad secret", func() error {
			_, err := c.Proclaim(ctxFor(t, callTimeout), connect.NewRequest(&pb.ProclaimRequest{LeaseId: 1, Secret: "zz"}))
			return err
		}, "secret"},
		{"proclaim with a value too long", func() error {
			_, err := c.Proclaim(ctxFor(t, callTimeout), connect.NewRequest(&pb.ProclaimRequest{LeaseId: 1, Secret: newSecret(t), Value: big}))
			return err
		}, "value"},
		{"resign without a secret", func() error {
			_, err := c.Resign(ctxFor(t, callTimeout), connect.NewRequest(&pb.ResignRequest{LeaseId: 1}))
			return err
		}, "secret"},
		{"leader without a name", func() error {
			_, err := c.Leader(ctxFor(t, callTimeout), connect.NewRequest(&pb.LeaderRequest{}))
			return err
		}, "election"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want invalid_argument mentioning %q", err, tc.want)
			}
		})
	}
}

// docs/elections.md's election examples run as documented through the JSON
// handlers: the campaign leads, and Leader shows its value and token.
func TestReadmeElectionsExample(t *testing.T) {
	n := startNode(t)
	hc := httpClient(t)
	status, out := postJSON(t, hc, n, leaseholdv1connect.ElectionsCampaignProcedure, docBody(t, "docs/elections.md", "# campaign for \"sched/primary\""))
	if status != 200 {
		t.Fatalf("docs/elections.md's Campaign: status %d: %v", status, out)
	}
	token := out["lease"].(map[string]any)["token"]
	if out["secret"] == "" || token == nil {
		t.Fatalf("docs/elections.md's Campaign: %v", out)
	}
	status, out = postJSON(t, hc, n, leaseholdv1connect.ElectionsLeaderProcedure, docBody(t, "docs/elections.md", "# who leads, with which token"))
	if status != 200 {
		t.Fatalf("docs/elections.md's Leader: status %d: %v", status, out)
	}
	if e := out["election"].(map[string]any); e["value"] != "10.0.0.7:9000" || e["token"] != token {
		t.Fatalf("docs/elections.md's Leader: %v; want value 10.0.0.7:9000 and token %v", out, token)
	}
}
