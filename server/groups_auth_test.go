package server_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// as is req with token's Authorization header.
func as[T any](token string, msg *T) *connect.Request[T] {
	r := connect.NewRequest(msg)
	r.Header().Set("Authorization", "Bearer "+token)
	return r
}

// TestGroupsRoles: a worker joins, acknowledges and watches only groups
// inside its prefixes, and renews its session with Leases/Renew; creating
// a group takes an operator, deleting one an admin.
func TestGroupsRoles(t *testing.T) {
	n := authNode(t) // the worker token's prefix is jobs/
	hc := httpClient(t)
	c := leaseholdv1connect.NewGroupsClient(hc, n.URL)
	_, err := c.Create(ctxFor(t, callTimeout), as(workerToken, &pb.GroupsCreateRequest{Group: "jobs/shards", Partitions: 2}))
	wantCode(t, err, connect.CodePermissionDenied)
	for _, g := range []string{"jobs/shards", "billing"} {
		if _, err := c.Create(ctxFor(t, callTimeout), as(operatorToken, &pb.GroupsCreateRequest{Group: g, Partitions: 2})); err != nil {
			t.Fatalf("operator create %s: %v", g, err)
		}
	}
	_, err = c.Join(ctxFor(t, callTimeout), as(workerToken, &pb.GroupsJoinRequest{Group: "billing", Member: "w"}))
	wantCode(t, err, connect.CodePermissionDenied)
	joined, err := c.Join(ctxFor(t, callTimeout), as(workerToken, &pb.GroupsJoinRequest{Group: "jobs/shards", Member: "w",
		Ttl: dur(time.Minute)}))
	if err != nil {
		t.Fatalf("worker join inside its prefix: %v", err)
	}
	if _, err := leaseholdv1connect.NewLeasesClient(hc, n.URL).Renew(ctxFor(t, callTimeout), as(workerToken,
		&pb.RenewRequest{LeaseId: joined.Msg.Lease.Id, Secret: joined.Msg.Secret})); err != nil {
		t.Fatalf("renew the session with Leases/Renew: %v", err)
	}
	stream, err := c.Assignments(ctxFor(t, callTimeout), as(workerToken, &pb.GroupsAssignmentsRequest{Group: "billing", Member: "w", LeaseId: 1}))
	if err != nil {
		t.Fatal(err)
	}
	if stream.Receive() {
		t.Fatalf("a worker watched a group outside its prefixes: %v", stream.Msg())
	}
	wantCode(t, stream.Err(), connect.CodePermissionDenied, "prefixes")
	stream.Close()
	_, err = c.Delete(ctxFor(t, callTimeout), as(operatorToken, &pb.GroupsDeleteRequest{Group: "jobs/shards", Reason: "done"}))
	wantCode(t, err, connect.CodePermissionDenied)
	if _, err := c.Delete(ctxFor(t, callTimeout), as(adminToken, &pb.GroupsDeleteRequest{Group: "jobs/shards", Reason: "done"})); err != nil {
		t.Fatalf("admin delete: %v", err)
	}
	_, err = leaseholdv1connect.NewLeasesClient(hc, n.URL).Renew(ctxFor(t, callTimeout), as(workerToken,
		&pb.RenewRequest{LeaseId: joined.Msg.Lease.Id, Secret: joined.Msg.Secret}))
	wantCode(t, err, connect.CodeNotFound)
}
