package server_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// A Join with a request_id but no secret is refused, as an Acquire's is:
// a retry after a lost reply would get a new node-made secret, be refused
// as a second session of the member, and leave the first session (whose
// secret nobody has) holding partitions nobody works on until its TTL
// ends. With a secret, the retry answers the first session and starts no
// second one.
func TestGroupsJoinRetry(t *testing.T) {
	n := startNode(t)
	c := leaseholdv1connect.NewGroupsClient(httpClient(t), n.URL)
	if _, err := c.Create(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsCreateRequest{Group: "g", Partitions: 4})); err != nil {
		t.Fatal(err)
	}
	join := func(req *pb.GroupsJoinRequest) (*pb.GroupsJoinResponse, error) {
		res, err := c.Join(ctxFor(t, callTimeout), connect.NewRequest(req))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}
	_, err := join(&pb.GroupsJoinRequest{Group: "g", Member: "m", Ttl: dur(time.Minute), RequestId: "join-1"})
	wantCode(t, err, connect.CodeInvalidArgument, "request_id", "secret")
	_, owners := groupOwners(t, c, "g")
	if len(owners.Members) != 0 {
		t.Fatalf("a refused join left members %v", owners.Members)
	}
	secret := newSecret(t)
	req := &pb.GroupsJoinRequest{Group: "g", Member: "m", Ttl: dur(time.Minute), Secret: secret, RequestId: "join-1"}
	first, err := join(req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := join(req)
	if err != nil || again.Lease.Id != first.Lease.Id || len(again.Partitions) != 4 {
		t.Fatalf("a retried join: %v %v, want the first session %d with its 4 partitions", again, err, first.Lease.Id)
	}
	if _, g := groupOwners(t, c, "g"); len(g.Members) != 1 {
		t.Fatalf("members after a retried join: %v, want one", g.Members)
	}
}

// Every Groups request_id is checked like any other: one with a control
// byte, or too long, is invalid_argument naming request_id.
func TestGroupsRequestIDValidated(t *testing.T) {
	n := startNode(t)
	c := leaseholdv1connect.NewGroupsClient(httpClient(t), n.URL)
	bad := "id\x00with a NUL"
	calls := map[string]func() error{
		"create": func() error {
			_, err := c.Create(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsCreateRequest{Group: "g", Partitions: 1, RequestId: bad}))
			return err
		},
		"grow": func() error {
			_, err := c.Grow(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsGrowRequest{Group: "g", Partitions: 2, RequestId: bad}))
			return err
		},
		"delete": func() error {
			_, err := c.Delete(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsDeleteRequest{Group: "g", Reason: "r", RequestId: bad}))
			return err
		},
		"join": func() error {
			_, err := c.Join(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsJoinRequest{Group: "g", Member: "m", Secret: newSecret(t), RequestId: bad}))
			return err
		},
		"ack revocation": func() error {
			_, err := c.AckRevocation(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsAckRevocationRequest{Group: "g", Member: "m",
				LeaseId: 1, Secret: newSecret(t), Partition: 0, Epoch: 1, RequestId: bad}))
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) { wantCode(t, call(), connect.CodeInvalidArgument, "request_id") })
	}
}
