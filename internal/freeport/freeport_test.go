package freeport

import (
	"net"
	"testing"
)

func TestPortsAreFreeDistinctAndBelowTheEphemeralRange(t *testing.T) {
	top := ephemeralStart()
	seen := map[int]bool{}
	for range 200 {
		p, err := Port()
		if err != nil {
			t.Fatal(err)
		}
		if p < lowest || p >= top {
			t.Fatalf("port %d outside [%d, %d)", p, lowest, top)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	addr, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	l.Close()
}
