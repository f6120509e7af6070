package client

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/api/leasehold"
)

// Leadership is a won election. It is a lease on the election's name and
// renews, ends and is lost exactly like one; its token is the term's
// fencing token. Its methods are safe for concurrent use.
type Leadership struct {
	lease *Lease
	name  string
	ctx   context.Context
}

// Campaign blocks until this candidate leads the election name with value
// (candidates lead in arrival order), the wait bound passes (Wait, default
// one hour: leasehold.ErrWaitTimeout) or ctx ends (the place in line is
// given up). Options are Acquire's: TTL, Wait, Owner, ProgressTimeout
// (default: none needed, leadership renews while the process lives),
// ManualRenew. FailOpen is ignored: nobody leads on a guess.
func (c *Client) Campaign(ctx context.Context, name, value string, opts ...Option) (*Leadership, error) {
	o := options(append([]Option{Wait(leasehold.MaxWait), ProgressTimeout(0)}, opts...))
	o.failOpen = false
	secret := randomHex(leasehold.SecretBytes)
	req := &pb.CampaignRequest{Election: name, Value: value, Ttl: durationpb.New(o.ttl), Wait: durationpb.New(o.wait),
		Owner: o.owner, Secret: secret, RequestId: randomHex(16)}
	l, err := c.hold(ctx, []string{name}, o, secret, func(ctx context.Context) (*pb.AcquireResponse, error) {
		return c.campaignCall(ctx, o.wait+c.cfg.RequestTimeout, req)
	})
	if err != nil {
		return nil, err
	}
	return &Leadership{lease: l, name: name, ctx: l.Context(context.Background())}, nil
}

// campaignCall sends a campaign, giving back a leadership won after ctx
// ended as acquireCall gives back a grant.
func (c *Client) campaignCall(ctx context.Context, perTry time.Duration, req *pb.CampaignRequest) (*pb.AcquireResponse, error) {
	resend := func(ctx context.Context) (*pb.CampaignResponse, error) {
		return call(ctx, c, perTry, electionsOf, leaseholdv1connect.ElectionsClient.Campaign, req)
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

// Name is the election's name.
func (l *Leadership) Name() string { return l.name }

// Token is the term's fencing token.
func (l *Leadership) Token() uint64 { return l.lease.Token() }

// Lease is the leadership lease.
func (l *Leadership) Lease() *Lease { return l.lease }

// Context is canceled, with the reason as its cause, as soon as
// leadership ends: lost, lapsed or resigned. Lead under it.
func (l *Leadership) Context() context.Context { return l.ctx }

// Done is closed when leadership ends.
func (l *Leadership) Done() <-chan struct{} { return l.lease.Done() }

// Err says why leadership ended, or nil while it holds.
func (l *Leadership) Err() error { return l.lease.Err() }

// Deadline is the local safe deadline of the leadership (see
// Lease.Deadline).
func (l *Leadership) Deadline() time.Time { return l.lease.Deadline() }

// Proclaim changes the value the leader announces, keeping leadership.
// It fails with leasehold.ErrNotHolder or ErrNotFound if leadership was
// lost.
func (l *Leadership) Proclaim(ctx context.Context, value string) error {
	_, err := call(ctx, l.lease.c, l.lease.c.cfg.RequestTimeout, electionsOf, leaseholdv1connect.ElectionsClient.Proclaim,
		&pb.ProclaimRequest{LeaseId: l.lease.id, Secret: l.lease.secret, Value: value, RequestId: randomHex(16)})
	return err
}

// Resign gives leadership up (a release of its lease): the next candidate
// leads. As Lease.Release, its error wraps ErrLeaseLost if leadership had
// already ended.
func (l *Leadership) Resign(ctx context.Context) error { return l.lease.Release(ctx) }

// ElectionInfo is an election as anyone may see it.
type ElectionInfo struct {
	Name       string        `json:"name"`
	LeaseID    uint64        `json:"lease_id,omitempty"` // 0: nobody leads now
	Token      uint64        `json:"token,omitempty"`
	Value      string        `json:"value"`
	Owner      string        `json:"owner,omitempty"`
	Since      time.Time     `json:"since,omitzero"`
	Candidates int           `json:"candidates"`
	ExpiresIn  time.Duration `json:"expires_in,omitempty"` // 0: unknown
}

func electionInfo(e *pb.Election) ElectionInfo {
	return ElectionInfo{Name: e.GetName(), LeaseID: e.GetLeaseId(), Token: e.GetToken(), Value: e.GetValue(),
		Owner: e.GetOwner(), Since: stamp(e.GetSince()), Candidates: int(e.GetCandidates()), ExpiresIn: dur(e.GetExpiresIn())}
}

// Leader reads the election's leader. It fails with leasehold.ErrNotFound
// if nobody leads or campaigns for it.
func (c *Client) Leader(ctx context.Context, name string) (ElectionInfo, error) {
	resp, err := call(ctx, c, c.cfg.RequestTimeout, electionsOf, leaseholdv1connect.ElectionsClient.Leader,
		&pb.LeaderRequest{Election: name})
	if err != nil {
		return ElectionInfo{}, err
	}
	return electionInfo(resp.Election), nil
}

// ElectionPage is one page of elections (ListElections).
type ElectionPage struct {
	Elections []ElectionInfo
	// NextPageToken asks for the next page; empty on the last one.
	NextPageToken string
}

// ListElections returns one page of the elections with a leader or
// candidates whose name starts with prefix, by name: pageSize of them (0:
// the server's default of 100; at most 1000), from pageToken ("" for the
// first page). Elections reads every page.
func (c *Client) ListElections(ctx context.Context, prefix string, pageSize int, pageToken string) (ElectionPage, error) {
	resp, err := call(ctx, c, c.cfg.RequestTimeout, electionsOf, leaseholdv1connect.ElectionsClient.List,
		&pb.ElectionsListRequest{Prefix: prefix, PageSize: int32(pageSize), PageToken: pageToken})
	if err != nil {
		return ElectionPage{}, err
	}
	return ElectionPage{Elections: convertAll(resp.Elections, electionInfo), NextPageToken: resp.NextPageToken}, nil
}
