package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/api"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/cluster"
)

// forwardedHeader marks a request a follower passed to the leader. A node
// never forwards a request twice, so a leader change mid-flight ends in
// Unavailable (which clients retry) rather than a loop.
const forwardedHeader = "Leasehold-Forwarded-By"

// forwarder sends requests to other nodes over their raft port (see
// cluster.DialForward), so a node needs no table of API addresses.
type forwarder struct {
	node    *cluster.Node
	selfID  string
	http    *http.Client
	tracer  trace.Tracer // nil: no spans
	mu      sync.Mutex
	clients map[string]any // *connect.Client, by raft address and procedure
}

func newForwarder(node *cluster.Node, selfID string) *forwarder {
	return &forwarder{
		node:   node,
		selfID: selfID,
		http: &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
				return node.DialForward(ctx, addr)
			},
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     time.Minute,
		}},
		clients: make(map[string]any),
	}
}

// forwardAndMap is the one place handlers' errors go through: a request
// this node cannot answer because it does not lead goes to the leader
// (once), and every other error becomes a Connect error with its code
// (package api). Handlers return plain errors.
func (f *forwarder) forwardAndMap() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			res, err := next(ctx, req)
			if err == nil {
				return res, nil
			}
			if addr, ok := leaderFor(req, err); ok {
				if via := routes[req.Spec().Procedure]; via != nil {
					return via(ctx, f, addr, req)
				}
			}
			return nil, api.ToConnect(err)
		}
	}
}

// route forwards a request of one procedure to the node at a raft address.
type route func(ctx context.Context, f *forwarder, addr string, req connect.AnyRequest) (connect.AnyResponse, error)

// routes are the procedures a follower forwards to the leader.
var routes = map[string]route{
	leaseholdv1connect.LeasesAcquireProcedure:         via[pb.AcquireRequest, pb.AcquireResponse],
	leaseholdv1connect.LeasesRenewProcedure:           via[pb.RenewRequest, pb.RenewResponse],
	leaseholdv1connect.LeasesReleaseProcedure:         via[pb.ReleaseRequest, pb.ReleaseResponse],
	leaseholdv1connect.LeasesGetProcedure:             via[pb.GetRequest, pb.GetResponse],
	leaseholdv1connect.LeasesListProcedure:            via[pb.ListRequest, pb.ListResponse],
	leaseholdv1connect.LeasesBatchProcedure:           via[pb.BatchRequest, pb.BatchResponse],
	leaseholdv1connect.KVPutProcedure:                 via[pb.PutRequest, pb.PutResponse],
	leaseholdv1connect.KVGetProcedure:                 via[pb.KVGetRequest, pb.KVGetResponse],
	leaseholdv1connect.KVDeleteProcedure:              via[pb.DeleteRequest, pb.DeleteResponse],
	leaseholdv1connect.KVCheckFenceProcedure:          via[pb.CheckFenceRequest, pb.CheckFenceResponse],
	leaseholdv1connect.KVTxnProcedure:                 via[pb.TxnRequest, pb.TxnResponse],
	leaseholdv1connect.KVListProcedure:                via[pb.KVListRequest, pb.KVListResponse],
	leaseholdv1connect.ClusterAddVoterProcedure:       via[pb.AddVoterRequest, pb.AddVoterResponse],
	leaseholdv1connect.ClusterRemoveServerProcedure:   via[pb.RemoveServerRequest, pb.RemoveServerResponse],
	leaseholdv1connect.ClusterTransferLeaderProcedure: via[pb.TransferLeaderRequest, pb.TransferLeaderResponse],
	leaseholdv1connect.ElectionsCampaignProcedure:     via[pb.CampaignRequest, pb.CampaignResponse],
	leaseholdv1connect.ElectionsProclaimProcedure:     via[pb.ProclaimRequest, pb.ProclaimResponse],
	leaseholdv1connect.ElectionsResignProcedure:       via[pb.ResignRequest, pb.ResignResponse],
	leaseholdv1connect.ElectionsLeaderProcedure:       via[pb.LeaderRequest, pb.LeaderResponse],
	leaseholdv1connect.ElectionsListProcedure:         via[pb.ElectionsListRequest, pb.ElectionsListResponse],
	leaseholdv1connect.AdminLocksProcedure:            via[pb.LocksRequest, pb.LocksResponse],
	leaseholdv1connect.AdminForceReleaseProcedure:     via[pb.ForceReleaseRequest, pb.ForceReleaseResponse],
	leaseholdv1connect.AdminAuditProcedure:            via[pb.AuditRequest, pb.AuditResponse],
	leaseholdv1connect.IdempotencyBeginProcedure:      via[pb.IdempotencyBeginRequest, pb.IdempotencyBeginResponse],
	leaseholdv1connect.IdempotencyCompleteProcedure:   via[pb.IdempotencyCompleteRequest, pb.IdempotencyCompleteResponse],
	leaseholdv1connect.IdempotencyAbandonProcedure:    via[pb.IdempotencyAbandonRequest, pb.IdempotencyAbandonResponse],
	leaseholdv1connect.IdempotencyGetProcedure:        via[pb.IdempotencyGetRequest, pb.IdempotencyGetResponse],
	leaseholdv1connect.IdempotencyListProcedure:       via[pb.IdempotencyListRequest, pb.IdempotencyListResponse],
	leaseholdv1connect.QueuesCreateProcedure:          via[pb.QueuesCreateRequest, pb.QueuesCreateResponse],
	leaseholdv1connect.QueuesListProcedure:            via[pb.QueuesListRequest, pb.QueuesListResponse],
	leaseholdv1connect.QueuesGetProcedure:             via[pb.QueuesGetRequest, pb.QueuesGetResponse],
	leaseholdv1connect.QueuesPurgeProcedure:           via[pb.QueuesPurgeRequest, pb.QueuesPurgeResponse],
	leaseholdv1connect.QueuesDeleteProcedure:          via[pb.QueuesDeleteRequest, pb.QueuesDeleteResponse],
	leaseholdv1connect.QueuesSendProcedure:            via[pb.QueuesSendRequest, pb.QueuesSendResponse],
	leaseholdv1connect.QueuesSendBatchProcedure:       via[pb.QueuesSendBatchRequest, pb.QueuesSendBatchResponse],
	leaseholdv1connect.QueuesReceiveProcedure:         via[pb.QueuesReceiveRequest, pb.QueuesReceiveResponse],
	leaseholdv1connect.QueuesAckProcedure:             via[pb.QueuesAckRequest, pb.QueuesAckResponse],
	leaseholdv1connect.QueuesAckBatchProcedure:        via[pb.QueuesAckBatchRequest, pb.QueuesAckBatchResponse],
	leaseholdv1connect.QueuesNackProcedure:            via[pb.QueuesNackRequest, pb.QueuesNackResponse],
	leaseholdv1connect.QueuesExtendProcedure:          via[pb.QueuesExtendRequest, pb.QueuesExtendResponse],
	leaseholdv1connect.QueuesRedriveProcedure:         via[pb.QueuesRedriveRequest, pb.QueuesRedriveResponse],
	leaseholdv1connect.QueuesDeadLettersProcedure:     via[pb.QueuesDeadLettersRequest, pb.QueuesDeadLettersResponse],
	leaseholdv1connect.GroupsCreateProcedure:          via[pb.GroupsCreateRequest, pb.GroupsCreateResponse],
	leaseholdv1connect.GroupsGrowProcedure:            via[pb.GroupsGrowRequest, pb.GroupsGrowResponse],
	leaseholdv1connect.GroupsDeleteProcedure:          via[pb.GroupsDeleteRequest, pb.GroupsDeleteResponse],
	leaseholdv1connect.GroupsListProcedure:            via[pb.GroupsListRequest, pb.GroupsListResponse],
	leaseholdv1connect.GroupsGetProcedure:             via[pb.GroupsGetRequest, pb.GroupsGetResponse],
	leaseholdv1connect.GroupsJoinProcedure:            via[pb.GroupsJoinRequest, pb.GroupsJoinResponse],
	leaseholdv1connect.GroupsLeaveProcedure:           via[pb.GroupsLeaveRequest, pb.GroupsLeaveResponse],
	leaseholdv1connect.GroupsAckRevocationProcedure:   via[pb.GroupsAckRevocationRequest, pb.GroupsAckRevocationResponse],
}

// via sends req (its message as the handler left it: request IDs and
// secrets chosen here included) to the node at addr.
func via[Req, Resp any](ctx context.Context, f *forwarder, addr string, req connect.AnyRequest) (connect.AnyResponse, error) {
	c := client[Req, Resp](f, addr, req.Spec().Procedure)
	r := forwarded(f, req, req.Any().(*Req))
	if f.tracer != nil {
		var span trace.Span
		ctx, span = f.tracer.Start(ctx, "forward to leader", trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("leasehold.leader_raft_addr", addr)))
		defer span.End()
		// The leader's span for this request joins the caller's trace.
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(r.Header()))
	}
	res, err := relay(c.CallUnary(ctx, r))
	if err != nil {
		return nil, err // not a typed nil response
	}
	return res, nil
}

// client returns the client of one procedure at the node at raft address
// addr.
func client[Req, Resp any](f *forwarder, addr, procedure string) *connect.Client[Req, Resp] {
	key := addr + procedure
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.clients[key].(*connect.Client[Req, Resp])
	if !ok {
		c = connect.NewClient[Req, Resp](f.http, "http://"+addr+procedure)
		f.clients[key] = c
	}
	return c
}

// leaderFor returns the leader's raft address if err says this node does
// not lead, a leader is known, and req was not forwarded already.
func leaderFor(req connect.AnyRequest, err error) (string, bool) {
	var nl *cluster.NotLeaderError
	if !errors.As(err, &nl) || nl.LeaderAddr == "" || req.Header().Get(forwardedHeader) != "" {
		return "", false
	}
	return nl.LeaderAddr, true
}

// forwarding says err will send req to the leader (see forwardAndMap): a
// handler returns it as it is, without counting or logging it as its own
// answer.
func forwarding(req connect.AnyRequest, err error) bool {
	_, ok := leaderFor(req, err)
	return ok
}

// forwarded copies msg into a request marked as forwarded by this node,
// carrying the caller's credentials.
func forwarded[T any](f *forwarder, in connect.AnyRequest, msg *T) *connect.Request[T] {
	return forwardedWith(f, in.Header(), msg)
}

// forwardedWith is forwarded for a caller whose request headers are hdr
// (a session stream relays its ops as unary calls).
func forwardedWith[T any](f *forwarder, hdr http.Header, msg *T) *connect.Request[T] {
	r := connect.NewRequest(msg)
	r.Header().Set(forwardedHeader, f.selfID)
	if auth := hdr.Get("Authorization"); auth != "" {
		r.Header().Set("Authorization", auth)
	}
	return r
}

// relay passes on the leader's answer to a forwarded request, error
// headers included (api.Relayed). A failure to
// reach the leader (a reset link, a leader that just died) becomes
// Unavailable, which clients retry with the same request ID, instead of
// the Canceled that connect reports for a broken connection.
func relay[T any](r *connect.Response[T], err error) (*connect.Response[T], error) {
	if err == nil {
		return r, nil
	}
	if connect.IsWireError(err) {
		return nil, api.Relayed(err)
	}
	return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("forwarding to the leader failed: %v; retry", err))
}

// LeaderHeader names the leader's API URL in answers (see
// Config.AdvertiseURL).
const LeaderHeader = "Leasehold-Leader"

// leaderHint marks this node's answers with its URL while it leads. A
// forwarded request's answer comes back through the follower with the
// leader's mark on it.
func leaderHint(node *cluster.Node, url string) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			res, err := next(ctx, req)
			if err == nil && res != nil && url != "" && node.IsLeader() {
				res.Header().Set(LeaderHeader, url)
			}
			return res, err
		}
	}
}
