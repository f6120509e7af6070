package server

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
)

// answeredLocally are the procedures every node answers itself: the
// members it knows, a status it gathers from every member, a backup of its
// own state; and the streams, which any node serves from its own history.
var answeredLocally = map[string]bool{
	"/leasehold.v1.Cluster/Members":    true,
	"/leasehold.v1.Cluster/Status":     true,
	"/leasehold.v1.Admin/Snapshot":     true, // this node's own state, streamed
	"/leasehold.v1.Groups/Assignments": true,
	// A session relays its ops to the leader itself, as unary Batch and
	// Acquire calls of the forwarding table (session.go).
	"/leasehold.v1.Sessions/Session": true,
}

// Every other procedure of the API is forwarded to the leader, with the
// request and response types it is declared with: a new primitive's
// procedures cannot be left out of the one forwarding table.
func TestEveryProcedureIsForwarded(t *testing.T) {
	for _, f := range []protoreflect.FileDescriptor{pb.File_leasehold_v1_leases_proto, pb.File_leasehold_v1_kv_proto,
		pb.File_leasehold_v1_admin_proto, pb.File_leasehold_v1_cluster_proto, pb.File_leasehold_v1_groups_proto, pb.File_leasehold_v1_session_proto} {
		for i := range f.Services().Len() {
			svc := f.Services().Get(i)
			for j := range svc.Methods().Len() {
				proc := "/" + string(svc.FullName()) + "/" + string(svc.Methods().Get(j).Name())
				if _, ok := routes[proc]; ok == answeredLocally[proc] {
					t.Errorf("%s: forwarded %v, want %v", proc, ok, !answeredLocally[proc])
				}
			}
		}
	}
}
