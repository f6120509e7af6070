package testcluster

import (
	"testing"

	"github.com/leasehold/leasehold/server"
)

// StartServerNode is StartNode with the API server configured by srv (for
// auth, TLS and limits).
func StartServerNode(t testing.TB, srv func(*server.Config), opts ...Option) *Node {
	t.Helper()
	return startNode(t, "", srv, opts...)
}

// HTTPSURL is the node's API URL for a TLS server.
func (n *Node) HTTPSURL() string { return "https://" + n.listener.Addr().String() }
