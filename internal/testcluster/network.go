package testcluster

import (
	"context"
	"fmt"
	"net"
	"sync"

	"github.com/leasehold/leasehold/cluster"
)

// Network sits under every in-process node's raft connections and can cut
// the link between any two nodes, in both directions, at once: new dials
// fail and open connections are closed.
type Network struct {
	mu    sync.Mutex
	cut   map[[2]string]bool
	conns map[[2]string]map[net.Conn]struct{}
}

// NewNetwork returns a network with every link up.
func NewNetwork() *Network {
	return &Network{cut: map[[2]string]bool{}, conns: map[[2]string]map[net.Conn]struct{}{}}
}

// Dialer returns the dialer for the node whose raft address is from.
func (nw *Network) Dialer(from string) cluster.Dialer {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		link := [2]string{from, addr}
		nw.mu.Lock()
		cut := nw.cut[link]
		nw.mu.Unlock()
		if cut {
			return nil, fmt.Errorf("testcluster: link %s -> %s is cut", from, addr)
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		nw.mu.Lock()
		defer nw.mu.Unlock()
		if nw.cut[link] { // cut while dialing
			c.Close()
			return nil, fmt.Errorf("testcluster: link %s -> %s is cut", from, addr)
		}
		if nw.conns[link] == nil {
			nw.conns[link] = map[net.Conn]struct{}{}
		}
		nw.conns[link][c] = struct{}{}
		return &trackedConn{Conn: c, nw: nw, link: link}, nil
	}
}

// Cut severs the link between a and b (raft addresses).
func (nw *Network) Cut(a, b string) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	for _, link := range [][2]string{{a, b}, {b, a}} {
		nw.cut[link] = true
		for c := range nw.conns[link] {
			c.Close()
		}
		delete(nw.conns, link)
	}
}

// Heal restores the link between a and b.
func (nw *Network) Heal(a, b string) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	delete(nw.cut, [2]string{a, b})
	delete(nw.cut, [2]string{b, a})
}

// HealAll restores every link.
func (nw *Network) HealAll() {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	clear(nw.cut)
}

type trackedConn struct {
	net.Conn
	nw   *Network
	link [2]string
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.nw.mu.Lock()
		delete(c.nw.conns[c.link], c.Conn)
		c.nw.mu.Unlock()
	})
	return c.Conn.Close()
}
