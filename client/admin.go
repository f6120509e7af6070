package client

import (
	"context"
	"errors"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/api/leasehold"
)

// Operators' calls: inspection (operator role), forced release (admin
// role) and the audit log (operator role). Any node answers; the leader
// serves them.

// LocksQuery selects what Locks shows.
type LocksQuery struct {
	// Prefix limits the list to resources starting with it.
	Prefix string
	// Resource shows exactly this resource, held or free, with its waiter
	// list (Prefix must then be empty).
	Resource string
}

// maxLocksPages bounds how many pages Locks reads (of 1000 leases each).
const maxLocksPages = 1000

// Locks lists held resources with their holder, countdown, renewals,
// progress, waiters and health marks (RenewalOverdue, ProgressStale), one
// entry per resource, reading every page. With q.Resource it returns that
// one resource, whose Holder is nil if it is free.
func (c *Client) Locks(ctx context.Context, q LocksQuery) ([]LockInfo, error) {
	if q.Resource != "" {
		r, err := call(ctx, c, c.cfg.RequestTimeout, adminOf, leaseholdv1connect.AdminClient.Locks, &pb.LocksRequest{Resource: q.Resource, Prefix: q.Prefix})
		if err != nil {
			return nil, err
		}
		return convertAll(r.Locks, lockInfo), nil
	}
	var all []LockInfo
	read := 0
	for l, err := range pages(func(token string) ([]*pb.Lock, string, error) {
		if read++; read > maxLocksPages {
			return nil, "", errors.New("client: more held leases than Locks reads; narrow the prefix")
		}
		r, err := call(ctx, c, c.cfg.RequestTimeout, adminOf, leaseholdv1connect.AdminClient.Locks,
			&pb.LocksRequest{Prefix: q.Prefix, PageSize: leasehold.MaxListLimit, PageToken: token})
		if err != nil {
			return nil, "", err
		}
		return r.Locks, r.NextPageToken, nil
	}) {
		if err != nil {
			return all, err
		}
		all = append(all, lockInfo(l))
	}
	return all, nil
}

// ForceRelease ends the lease holding resource if it is still leaseID, and
// records reason (1 to 512 bytes) with the caller's identity in the audit
// log. The holder may still be writing: only resources that check fencing
// tokens are safe from it. It returns the ended lease; an error matching
// leasehold.ErrNotHolder means another lease holds the resource now (look
// again), leasehold.ErrNotFound that it is not held. A retry after a lost
// reply never releases twice.
func (c *Client) ForceRelease(ctx context.Context, resource string, leaseID uint64, reason string) (*LeaseInfo, error) {
	r, err := call(ctx, c, c.cfg.RequestTimeout, adminOf, leaseholdv1connect.AdminClient.ForceRelease, &pb.ForceReleaseRequest{
		Resource: resource, LeaseId: leaseID, Reason: reason, RequestId: randomHex(16),
	})
	if err != nil {
		return nil, err
	}
	return leaseInfo(r.Lease), nil
}

// Audit returns the newest limit (0: the server's default of 100; at most
// 1000) audit records made within since before now (0: every record kept),
// oldest first, and whether older ones were left out.
func (c *Client) Audit(ctx context.Context, since time.Duration, limit int) (records []AuditRecord, truncated bool, err error) {
	req := &pb.AuditRequest{Limit: int32(min(max(limit, -1), leasehold.MaxListLimit+1))}
	if since != 0 {
		req.Since = durationpb.New(since)
	}
	r, err := call(ctx, c, c.cfg.RequestTimeout, adminOf, leaseholdv1connect.AdminClient.Audit, req)
	if err != nil {
		return nil, false, err
	}
	return convertAll(r.Records, auditRecord), r.Truncated, nil
}
