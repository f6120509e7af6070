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
	node   *cluster.Node
	selfID string
	http   *http.Client
	mu     sync.Mutex
	peers  map[string]*peer // by raft address
}

// peer holds the API clients for one other node.
type peer struct {
	leases  leaseholdv1connect.LeasesClient
	cluster leaseholdv1connect.ClusterClient
	kv      leaseholdv1connect.KVClient
	admin   leaseholdv1connect.AdminClient
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
		peers: make(map[string]*peer),
	}
}

// at returns the clients for the node at raft address addr.
func (f *forwarder) at(addr string) *peer {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.peers[addr]
	if p == nil {
		url := "http://" + addr
		p = &peer{
			leases:  leaseholdv1connect.NewLeasesClient(f.http, url),
			cluster: leaseholdv1connect.NewClusterClient(f.http, url),
			kv:      leaseholdv1connect.NewKVClient(f.http, url),
			admin:   leaseholdv1connect.NewAdminClient(f.http, url),
		}
		f.peers[addr] = p
	}
	return p
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

// forwarded copies msg into a request marked as forwarded by this node,
// carrying the caller's credentials.
func forwarded[T any](f *forwarder, in connect.AnyRequest, msg *T) *connect.Request[T] {
	r := connect.NewRequest(msg)
	r.Header().Set(forwardedHeader, f.selfID)
	if auth := in.Header().Get("Authorization"); auth != "" {
		r.Header().Set("Authorization", auth)
	}
	return r
}

// relay passes on the leader's answer to a forwarded request. A failure to
// reach the leader (a reset link, a leader that just died) becomes
// Unavailable, which clients retry with the same request ID, instead of
// the Canceled that connect reports for a broken connection.
func relay[T any](r *connect.Response[T], err error) (*connect.Response[T], error) {
	if err == nil || connect.IsWireError(err) {
		return r, err
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
