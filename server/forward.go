package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/leasehold/leasehold/api"
)

// forwarder sends requests to other nodes over their raft port (see
// Front.DialForward), so a node needs no table of API addresses.
type forwarder struct {
	node    Front
	selfID  string
	http    *http.Client
	tracer  trace.Tracer // nil: no spans
	mu      sync.Mutex
	callers map[string]api.Caller // by raft address and procedure
}

func newForwarder(node Front, selfID string) *forwarder {
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
		callers: make(map[string]api.Caller),
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
			if addr, row, ok := leaderFor(req, err); ok {
				return f.call(ctx, addr, row, req.Any().(proto.Message), f.forwardHeader(req.Header(), req.Peer().Addr))
			}
			return nil, api.ToConnect(err)
		}
	}
}

// call sends msg, a request of row as the handler left it (request IDs and
// secrets chosen here included), with header hdr to the node at raft
// address addr.
func (f *forwarder) call(ctx context.Context, addr string, row *api.Procedure, msg proto.Message, hdr http.Header) (connect.AnyResponse, error) {
	if f.tracer != nil {
		hdr = hdr.Clone() // a session's calls share theirs
		var span trace.Span
		ctx, span = f.tracer.Start(ctx, "forward to leader", trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("leasehold.leader_raft_addr", addr)))
		defer span.End()
		// The leader's span for this request joins the caller's trace.
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(hdr))
	}
	return relay(f.caller(addr, row).CallUnary(ctx, msg, hdr))
}

// caller is the caller of one procedure at the node at raft address addr.
func (f *forwarder) caller(addr string, row *api.Procedure) api.Caller {
	key := addr + row.Name
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.callers[key]
	if !ok {
		c = row.Dial(f.http, "http://"+addr)
		f.callers[key] = c
	}
	return c
}

// leaderFor returns the leader's raft address and req's row if err says
// this node does not lead, a leader is known, req was not forwarded
// already, and its procedure goes to the leader.
func leaderFor(req connect.AnyRequest, err error) (string, *api.Procedure, bool) {
	row := api.Lookup(req.Spec().Procedure)
	addr, ok := leaderOf(err)
	if !ok || row == nil || row.Route != api.RouteLeader || req.Header().Get(forwardedHeader) != "" {
		return "", nil, false
	}
	return addr, row, true
}

// forwarding says err will send req to the leader (see forwardAndMap): a
// handler returns it as it is, without counting or logging it as its own
// answer.
func forwarding(req connect.AnyRequest, err error) bool {
	_, _, ok := leaderFor(req, err)
	return ok
}

// relay passes on the leader's answer to a forwarded request, error
// headers included (api.Relayed). A failure to
// reach the leader (a reset link, a leader that just died) becomes
// Unavailable, which clients retry with the same request ID, instead of
// the Canceled that connect reports for a broken connection.
func relay(r connect.AnyResponse, err error) (connect.AnyResponse, error) {
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
func leaderHint(node Front, url string) connect.UnaryInterceptorFunc {
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
