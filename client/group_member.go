package client

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/api/leasehold"
)

// Membership is a member's session in a group. The session is a lease: it
// renews, ends and is lost exactly like one (Lease), and its loss is the
// member's death: the server then gives its partitions to the others.
// Its methods are safe for concurrent use.
type Membership struct {
	lease         *Lease
	group, member string
}

// Join starts a session of member in group. Options are Acquire's: TTL
// (default 15s), Metadata, ManualRenew, ProgressTimeout (default: none
// needed, the session renews while the process lives). FailOpen is
// ignored: no partition is owned on a guess. It fails with leasehold.ErrHeld
// (AlreadyExists) while member still has a live session, and with
// leasehold.ErrNotFound if there is no such group. Read the member's
// partitions with Assignments.
func (c *Client) Join(ctx context.Context, group, member string, opts ...Option) (*Membership, error) {
	o := options(append([]Option{ProgressTimeout(0)}, opts...))
	o.failOpen, o.groupSession = false, true
	secret := randomHex(leasehold.SecretBytes)
	req := &pb.GroupsJoinRequest{Group: group, Member: member, Ttl: durationpb.New(o.ttl), Metadata: o.metadata,
		Secret: secret, RequestId: randomHex(16)}
	l, err := c.hold(ctx, []string{group}, o, secret, func(ctx context.Context) (*pb.AcquireResponse, error) {
		return c.joinCall(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	return &Membership{lease: l, group: group, member: member}, nil
}

// joinCall sends a Join, giving back a session granted after ctx ended as
// acquireCall gives back a grant.
func (c *Client) joinCall(ctx context.Context, req *pb.GroupsJoinRequest) (*pb.AcquireResponse, error) {
	resend := func(ctx context.Context) (*pb.GroupsJoinResponse, error) {
		return call(ctx, c, c.cfg.RequestTimeout, groupsOf, leaseholdv1connect.GroupsClient.Join, req)
	}
	resp, err := resend(ctx)
	if err != nil {
		if ctx.Err() != nil {
			c.giveBackWith(req.Secret, func(ctx context.Context) (*pb.Lease, error) {
				resp, err := resend(ctx)
				return resp.GetLease(), err
			})
		}
		return nil, err
	}
	return &pb.AcquireResponse{Lease: resp.Lease, Secret: resp.Secret, ExpiresIn: resp.ExpiresIn}, nil
}

// Group is the group's name.
func (m *Membership) Group() string { return m.group }

// Member is the member's name.
func (m *Membership) Member() string { return m.member }

// Lease is the session lease.
func (m *Membership) Lease() *Lease { return m.lease }

// Done is closed when the session ends: left, lost or lapsed.
func (m *Membership) Done() <-chan struct{} { return m.lease.Done() }

// Err says why the session ended, or nil while it holds.
func (m *Membership) Err() error { return m.lease.Err() }

// Deadline is the session's local safe deadline (see Lease.Deadline): the
// member's partitions are certainly its own until then.
func (m *Membership) Deadline() time.Time { return m.lease.Deadline() }

// Leave ends the session: the member's partitions go to the others at
// once. Stop working on them first. As Lease.Release, its error wraps
// ErrLeaseLost if the session had already ended; calling it again
// returns nil.
func (m *Membership) Leave(ctx context.Context) error {
	return m.lease.releaseWith(ctx, m.lease.leaveCall)
}

func (l *Lease) leaveCall(ctx context.Context) error {
	_, err := call(ctx, l.c, l.c.cfg.RequestTimeout, groupsOf, leaseholdv1connect.GroupsClient.Leave,
		&pb.GroupsLeaveRequest{LeaseId: l.id, Secret: l.secret, RequestId: randomHex(16)})
	return err
}

// AckRevocation tells the group that this member stopped working on
// partition, granted with epoch: it then goes to its next owner. Call it
// only once nothing acts on the partition any more. It fails with
// leasehold.ErrStaleToken (Aborted) if epoch is not the member's current
// grant of the partition.
func (m *Membership) AckRevocation(ctx context.Context, partition int, epoch uint64) error {
	l := m.lease
	_, err := call(ctx, l.c, l.c.cfg.RequestTimeout, groupsOf, leaseholdv1connect.GroupsClient.AckRevocation,
		&pb.GroupsAckRevocationRequest{Group: m.group, Member: m.member, LeaseId: l.id, Secret: l.secret,
			Partition: count(partition), Epoch: epoch, RequestId: randomHex(16)})
	return err
}
