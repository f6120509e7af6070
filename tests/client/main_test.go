package client_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests.
//
// Every test stops its nodes (t.Cleanup in testcluster.StartNode), closes
// the idle connections of the HTTP clients it hands to client.New, and
// releases the leases it still holds, so neither raft nor a keep-alive pool
// should leave anything behind. The transport client.New makes itself
// when Config.HTTPClient is nil (TestAcquireWithDefaultHTTPClient) is closed
// by Client.Close; a connection busy at that moment keeps its two
// goroutines, net/http.(*persistConn).readLoop and writeLoop, until the
// server side closes it, which the node's shutdown does. goleak retries for
// a while before it reports, which covers that gap. The one
// goroutine ignored is the give-back of an acquire whose caller left
// (Client.giveBackWith): it is meant to outlive the call, and ends within
// RequestTimeout even when no node answers. Nor is raft's
// NetworkTransport.handleConn, the reader of a peer's connection that its
// Close does not close (the 3-node session tests'); it is not ours.
// Anything else reported is a
// real leak, such as a Lease's renewal loop or Lease.Context watcher
// outliving its lease.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/leasehold/leasehold/client.(*Client).giveBackWith.func1"),
		goleak.IgnoreAnyFunction("github.com/hashicorp/raft.(*NetworkTransport).handleConn"))
}
