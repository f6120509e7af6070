package server

import (
	"context"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/service"
)

// elections implements leaseholdv1connect.ElectionsHandler. Leadership is
// a lease: a campaign is checked and answered as an acquire of the one
// resource named by the election, and resigning is a release.
type elections struct{ s *Server }

func (h elections) Campaign(ctx context.Context, req *connect.Request[pb.CampaignRequest]) (*connect.Response[pb.CampaignResponse], error) {
	s, m := h.s, req.Msg
	start := time.Now()
	cmd, secret, err := campaignCommand(m, caller(ctx))
	if err != nil {
		s.metrics.Campaigns.WithLabelValues("invalid").Inc()
		return nil, err
	}
	if err := s.charge(ctx, 1); err != nil {
		return nil, err
	}
	m.RequestId, m.Secret = cmd.RequestID, secret // a forwarded copy carries them
	res, err := s.svc.Campaign(ctx, cmd)
	if forwarding(req, err) {
		return nil, err // the leader answers, and counts it
	}
	out, err := s.acquireAnswer(secret, res, err, start)
	if err != nil {
		s.metrics.Campaigns.WithLabelValues(leasehold.CodeOf(err).String()).Inc()
		return nil, err
	}
	s.metrics.Campaigns.WithLabelValues("leading").Inc()
	return connect.NewResponse(&pb.CampaignResponse{Lease: out.Lease, Secret: out.Secret, ExpiresIn: out.ExpiresIn}), nil
}

// campaignCommand checks a CampaignRequest as the acquire it is, with the
// election's own field names in the messages.
func campaignCommand(m *pb.CampaignRequest, caller string) (*service.Campaign, string, error) {
	if err := leasehold.ValidateName("election", m.Election, leasehold.MaxResourceLen, true); err != nil {
		return nil, "", err
	}
	if err := electionValue(m.Value); err != nil {
		return nil, "", err
	}
	wait := m.Wait
	if wait == nil {
		wait = durationpb.New(leasehold.MaxWait) // campaigning is waiting to lead
	}
	acq, secret, err := acquireCommand(&pb.AcquireRequest{Resources: []string{m.Election}, Ttl: m.Ttl, Wait: wait,
		Owner: m.Owner, Secret: m.Secret, RequestId: m.RequestId}, caller)
	if err != nil {
		return nil, "", err
	}
	return &service.Campaign{Acquire: *acq.Base(), Value: []byte(m.Value)}, secret, nil
}

func electionValue(v string) error {
	if len(v) > service.MaxElectionValue {
		return leasehold.Errorf(leasehold.CodeInvalid, "value is %d bytes; the limit is %d", len(v), service.MaxElectionValue)
	}
	return nil
}

func (h elections) Proclaim(ctx context.Context, req *connect.Request[pb.ProclaimRequest]) (*connect.Response[pb.ProclaimResponse], error) {
	s, m := h.s, req.Msg
	hash, err := leaseRef(m.LeaseId, m.Secret)
	if err != nil {
		return nil, err
	}
	if err := electionValue(m.Value); err != nil {
		return nil, err
	}
	if m.RequestId, err = requestID(m.RequestId); err != nil {
		return nil, err
	}
	res, err := s.svc.Proclaim(ctx, &service.Proclaim{RequestID: m.RequestId, LeaseID: m.LeaseId, SecretHash: hash,
		Value: []byte(m.Value), Caller: caller(ctx)})
	if err != nil {
		return nil, err
	}
	l := res.Lease
	e := &pb.Election{Name: l.Resources[0], LeaseId: l.ID, Token: l.Token, Value: m.Value, Owner: l.Owner, Since: timePB(l.AcquiredAt)}
	return connect.NewResponse(&pb.ProclaimResponse{Election: e}), nil
}

func (h elections) Resign(ctx context.Context, req *connect.Request[pb.ResignRequest]) (*connect.Response[pb.ResignResponse], error) {
	s := h.s
	cmd, err := releaseCommand(&pb.ReleaseRequest{LeaseId: req.Msg.LeaseId, Secret: req.Msg.Secret, RequestId: req.Msg.RequestId}, caller(ctx))
	if err != nil {
		return nil, err
	}
	req.Msg.RequestId = cmd.RequestID
	res, err := s.svc.Resign(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.ResignResponse{Lease: leasePB(res.Lease, -1)}), nil
}

func (h elections) Leader(ctx context.Context, req *connect.Request[pb.LeaderRequest]) (*connect.Response[pb.LeaderResponse], error) {
	name := req.Msg.Election
	if err := leasehold.ValidateName("election", name, leasehold.MaxResourceLen, true); err != nil {
		return nil, err
	}
	e, expiresIn, found, err := h.s.svc.Leader(ctx, name)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, leasehold.Errorf(leasehold.CodeNotFound, "nobody leads or campaigns for election %q", name)
	}
	return connect.NewResponse(&pb.LeaderResponse{Election: electionPB(e, expiresIn)}), nil
}

func (h elections) List(ctx context.Context, req *connect.Request[pb.ElectionsListRequest]) (*connect.Response[pb.ElectionsListResponse], error) {
	m := req.Msg
	if err := leasehold.ValidateName("prefix", m.Prefix, leasehold.MaxResourceLen, false); err != nil {
		return nil, err
	}
	limit, err := pageSize(m.PageSize)
	if err != nil {
		return nil, err
	}
	// The token is the last name of the previous page: a name under prefix.
	if m.PageToken != "" && (!strings.HasPrefix(m.PageToken, m.Prefix) ||
		leasehold.ValidateName("page_token", m.PageToken, leasehold.MaxResourceLen, true) != nil) {
		return nil, leasehold.Errorf(leasehold.CodeInvalid, "page_token is not one this server issued for prefix %q", m.Prefix)
	}
	es, more, err := h.s.svc.Elections(ctx, m.Prefix, m.PageToken, limit)
	if err != nil {
		return nil, err
	}
	out := &pb.ElectionsListResponse{Elections: make([]*pb.Election, len(es))}
	for i, e := range es {
		out.Elections[i] = electionPB(e, -1)
	}
	if more && len(es) > 0 {
		out.NextPageToken = es[len(es)-1].Name
	}
	return connect.NewResponse(out), nil
}

func (h elections) Observe(ctx context.Context, req *connect.Request[pb.ObserveRequest], stream *connect.ServerStream[pb.ObserveResponse]) error {
	s, name := h.s, req.Msg.Election
	if err := leasehold.ValidateName("election", name, leasehold.MaxResourceLen, true); err != nil {
		return api.ToConnect(err)
	}
	// As a watch, the stream ends as soon as the server starts shutting
	// down, and tells its caller where to resume.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.watching, cancel)
	defer stop()
	o, err := s.svc.Observe(ctx, name, req.Msg.GetFromIndex(), req.Msg.FromIndex != nil)
	if err != nil {
		return api.ToConnect(err)
	}
	defer o.Close()
	last := o.Index
	first := &pb.ObserveResponse{Index: last}
	if o.Current != nil {
		first.Election = electionPB(*o.Current, -1)
	}
	if err := stream.Send(first); err != nil {
		return err
	}
	for b := range o.Batches() {
		sent := false
		for i := range b.Events {
			if e := &b.Events[i]; service.IsLeaderChange(e, name) {
				sent = true
				el := &pb.Election{Name: name, LeaseId: e.LeaseID, Token: e.Token, Value: string(e.Value), Owner: e.Owner}
				if err := stream.Send(&pb.ObserveResponse{Election: el, Index: e.Index}); err != nil {
					return err
				}
			}
		}
		if !sent {
			if err := stream.Send(&pb.ObserveResponse{Index: b.Index}); err != nil { // progress: resume from here
				return err
			}
		}
		last = b.Index
	}
	if s.watching.Err() != nil {
		return api.ToConnect(leasehold.Errorf(leasehold.CodeUnavailable,
			"this node is shutting down: resume observing from index %d on another node", last))
	}
	if err := o.Err(); leasehold.CodeOf(err) != leasehold.CodeUnknown {
		return api.ToConnect(err)
	}
	return ctx.Err()
}

// electionPB converts an election for the wire; expiresIn < 0 means
// unknown here.
func electionPB(e service.Election, expiresIn time.Duration) *pb.Election {
	out := &pb.Election{Name: e.Name, LeaseId: e.LeaseID, Token: e.Token, Value: string(e.Value), Owner: e.Owner,
		Since: timePB(e.Since), Candidates: uint32(e.Candidates)}
	if e.LeaseID != 0 && expiresIn >= 0 {
		out.ExpiresIn = durationpb.New(expiresIn)
	}
	return out
}
