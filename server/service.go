package server

import (
	"context"
	"net"
)

// The server's two dependencies on its node, both interfaces: the
// service (service.API, implemented by *service.Service), which the
// handlers call with typed requests, and the Front, for what is the API
// front's own business. Handler tests may give fakes of either
// (Config.Service, Config.Front): nothing of raft or the state machine is
// needed to serve a request.

// Front is what the API front needs of its node beside the service: who
// leads (to name the leader in answers and in the readiness probe),
// whether the node can serve (/healthz, /readyz), and the node's raft
// listener, over which nodes forward requests to the leader (forward.go,
// trust.go). *cluster.Node implements it.
type Front interface {
	// IsLeader says whether this node leads now.
	IsLeader() bool
	// Leader is the leader's id and raft address ("" if none is known).
	Leader() (id, raftAddr string)
	// Ready fails unless this node can serve: it leads and a quorum just
	// confirmed it, or it follows a leader it heard from recently.
	Ready(ctx context.Context) error
	// Fault is why the node stopped serving for good (a failed log
	// write), or nil.
	Fault() error
	// DialForward connects to the node at raftAddr for a forwarded
	// request; ForwardListener accepts the requests other nodes forward.
	DialForward(ctx context.Context, raftAddr string) (net.Conn, error)
	ForwardListener() net.Listener
}
