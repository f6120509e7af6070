package server

import (
	"net"
	"net/http"
)

// Trust between nodes. A follower forwards a request to the leader over
// the raft port (Front.DialForward), marked with headers only a node
// sends. The node serves those connections apart from the API listener's
// (Serve): with raft TLS they arrive inside mutual TLS, so only a holder
// of a certificate from the cluster's CA gets that far, and without it
// the raft port is trusted as raft itself is (serve refuses a non-loopback
// raft address without raft TLS unless --insecure). The API listener drops
// those headers from every request (fromClients): a client cannot claim
// to be a node.
//
// None of them grants anything: the leader authenticates the caller's own
// credentials again and charges its rate limit to the token they name.
// Without auth it charges the caller's address, which the follower passes
// on in forwardedForHeader.
const (
	// forwardedHeader names the node that forwarded a request. A node
	// never forwards a request twice, so a leader change mid-flight ends
	// in Unavailable (which clients retry) rather than a loop.
	forwardedHeader = "Leasehold-Forwarded-By"
	// forwardedForHeader is the address of the caller a forwarded
	// request came from.
	forwardedForHeader = "Leasehold-Forwarded-For"
)

// nodeHeaders are the request headers only a node may send.
var nodeHeaders = []string{forwardedHeader, forwardedForHeader}

// fromClients serves next the API listener's requests without the headers
// only a node may send.
func fromClients(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, h := range nodeHeaders {
			if _, ok := r.Header[h]; ok {
				r.Header.Del(h)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// callerAddr is the address of the caller of a request with headers hdr
// from peer: the one the forwarding node names, or the peer's own.
func callerAddr(hdr http.Header, peer string) string {
	if a := hdr.Get(forwardedForHeader); a != "" {
		return a
	}
	host, _, err := net.SplitHostPort(peer)
	if err != nil {
		return peer
	}
	return host
}

// forwardHeader is the header of a request forwarded for a caller whose
// request had headers hdr and came from peer: its credentials, and who
// it is and which node forwards it.
func (f *forwarder) forwardHeader(hdr http.Header, peer string) http.Header {
	out := http.Header{}
	out.Set(forwardedHeader, f.selfID)
	out.Set(forwardedForHeader, callerAddr(hdr, peer))
	if auth := hdr.Get("Authorization"); auth != "" {
		out.Set("Authorization", auth)
	}
	return out
}
