package server_test

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// TestGroupsWritesCheckGroupAndRequestID: every write to a named group
// (create, grow, delete, ack-revocation) refuses a missing group name and
// an over-long request_id as invalid, naming the field, before anything
// else about the request is looked at.
func TestGroupsWritesCheckGroupAndRequestID(t *testing.T) {
	n := startNode(t)
	c := leaseholdv1connect.NewGroupsClient(httpClient(t), n.URL)
	long := strings.Repeat("r", 4096)
	writes := map[string]func(ctx context.Context, group, requestID string) error{
		"create": func(ctx context.Context, group, requestID string) error {
			_, err := c.Create(ctx, connect.NewRequest(&pb.GroupsCreateRequest{Group: group, RequestId: requestID, Partitions: 2}))
			return err
		},
		"grow": func(ctx context.Context, group, requestID string) error {
			_, err := c.Grow(ctx, connect.NewRequest(&pb.GroupsGrowRequest{Group: group, RequestId: requestID, Partitions: 4}))
			return err
		},
		"delete": func(ctx context.Context, group, requestID string) error {
			_, err := c.Delete(ctx, connect.NewRequest(&pb.GroupsDeleteRequest{Group: group, RequestId: requestID, Reason: "test"}))
			return err
		},
		"ack-revocation": func(ctx context.Context, group, requestID string) error {
			_, err := c.AckRevocation(ctx, connect.NewRequest(&pb.GroupsAckRevocationRequest{Group: group, RequestId: requestID}))
			return err
		},
	}
	for name, write := range writes {
		t.Run(name, func(t *testing.T) {
			wantCode(t, write(ctxFor(t, callTimeout), "", ""), connect.CodeInvalidArgument, "group")
			wantCode(t, write(ctxFor(t, callTimeout), "shards", long), connect.CodeInvalidArgument, "request_id")
		})
	}
}
