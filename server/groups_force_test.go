package server_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// A member's session is forced like any lease (docs/groups.md):
// Admin.ForceRelease with the session's resource as Leases.List shows it
// ends the session, and its partitions go to the other members. Before,
// that resource was refused for its zero bytes, so an operator could not
// force one stuck member out (only delete the whole group).
func TestForceReleaseOfAGroupSession(t *testing.T) {
	n := startNode(t)
	hc := httpClient(t)
	g := leaseholdv1connect.NewGroupsClient(hc, n.URL)
	if _, err := g.Create(ctxFor(t, callTimeout), connect.NewRequest(&pb.GroupsCreateRequest{Group: "g", Partitions: 2})); err != nil {
		t.Fatal(err)
	}
	stuck := joinGroup(t, g, "g", "stuck", time.Hour)
	joinGroup(t, g, "g", "other", time.Hour)
	list, err := newClient(t, n).List(ctxFor(t, callTimeout), connect.NewRequest(&pb.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var resource string
	for _, l := range list.Msg.Leases {
		if l.Id == stuck.Lease.Id {
			resource = l.Resources[0]
		}
	}
	if resource == "" {
		t.Fatalf("the session lease %d is not listed: %v", stuck.Lease.Id, list.Msg.Leases)
	}
	admin := leaseholdv1connect.NewAdminClient(hc, n.URL)
	if _, err := admin.ForceRelease(ctxFor(t, callTimeout), connect.NewRequest(&pb.ForceReleaseRequest{Resource: resource,
		LeaseId: stuck.Lease.Id, Reason: "stuck member"})); err != nil {
		t.Fatalf("force release of the session %q: %v", resource, err)
	}
	owners, got := groupOwners(t, g, "g")
	if len(got.Members) != 1 || owners[0] != "other" || owners[1] != "other" {
		t.Fatalf("after forcing the session: owners %q, members %v; want every partition other's", owners, got.Members)
	}
	// A control byte anywhere else is still refused.
	_, err = admin.ForceRelease(ctxFor(t, callTimeout), connect.NewRequest(&pb.ForceReleaseRequest{Resource: "\x00group/g\x00",
		LeaseId: stuck.Lease.Id, Reason: "x"}))
	wantCode(t, err, connect.CodeInvalidArgument, "resource")
	_, err = admin.ForceRelease(ctxFor(t, callTimeout), connect.NewRequest(&pb.ForceReleaseRequest{Resource: "a\x00b",
		LeaseId: stuck.Lease.Id, Reason: "x"}))
	wantCode(t, err, connect.CodeInvalidArgument, "resource")
}
