package testutil

import (
	"net"
	"testing"

	"github.com/leasehold/leasehold/internal/freeport"
)

// Listen is a loopback listener on a port the kernel picks. Prefer it: a
// listener handed to the server cannot lose its port to anyone.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// FreeAddr is a loopback address whose port was free a moment ago (see
// freeport), for servers that must be given an address rather than a
// listener: a child process, or a node restarted on the address its peers
// and its own raft configuration know it by.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
