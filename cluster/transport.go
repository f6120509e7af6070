package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// One TCP port carries two kinds of connection, told apart by their first
// byte (as Consul does): raft's own RPCs, and API requests a follower
// forwards to the leader. Forwarding over the raft address means a node
// needs no table of its peers' API addresses.
const (
	connRaft    byte = 'R'
	connForward byte = 'F'
)

// Dialer opens a TCP connection; tests replace it to cut links.
type Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

type mux struct {
	ln       net.Listener
	dial     Dialer
	tls      *tls.Config // nil: plain TCP
	raft     chan net.Conn
	forward  chan net.Conn
	closed   chan struct{}
	closeErr error
	once     sync.Once
	wg       sync.WaitGroup
}

func newMux(ln net.Listener, dial Dialer, tlsCfg *tls.Config) *mux {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	if tlsCfg != nil {
		// Every node is both server and client to the others: with mutual
		// TLS only holders of a certificate from the cluster's CA get in.
		ln = tls.NewListener(ln, tlsCfg)
	}
	m := &mux{ln: ln, dial: dial, tls: tlsCfg, raft: make(chan net.Conn), forward: make(chan net.Conn), closed: make(chan struct{})}
	m.wg.Add(1)
	go m.accept()
	return m
}

func (m *mux) accept() {
	defer m.wg.Done()
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.closed:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			time.Sleep(10 * time.Millisecond) // e.g. too many open files: don't spin
			continue
		}
		go m.route(c)
	}
}

func (m *mux) route(c net.Conn) {
	var b [1]byte
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(b[:]); err != nil {
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	var ch chan net.Conn
	switch b[0] {
	case connRaft:
		ch = m.raft
	case connForward:
		ch = m.forward
	default:
		c.Close()
		return
	}
	select {
	case ch <- c:
	case <-m.closed:
		c.Close()
	}
}

func (m *mux) close() error {
	m.once.Do(func() {
		close(m.closed)
		m.closeErr = m.ln.Close()
		m.wg.Wait()
	})
	return m.closeErr
}

// dialKind opens a connection of the given kind to addr.
func (m *mux) dialKind(ctx context.Context, addr string, kind byte) (net.Conn, error) {
	c, err := m.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if m.tls != nil {
		cfg := m.tls.Clone()
		if host, _, err := net.SplitHostPort(addr); err == nil && cfg.ServerName == "" {
			cfg.ServerName = host
		}
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("tls handshake with %s: %w", addr, err)
		}
		c = tc
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetWriteDeadline(dl)
	}
	if _, err := c.Write([]byte{kind}); err != nil {
		c.Close()
		return nil, err
	}
	c.SetWriteDeadline(time.Time{})
	return c, nil
}

// subListener hands out the connections of one kind. Closing it stops its
// Accept; the mux owns the socket and closes it with the node.
type subListener struct {
	m    *mux
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newSubListener(m *mux, ch chan net.Conn) *subListener {
	return &subListener{m: m, ch: ch, done: make(chan struct{})}
}

func (l *subListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-l.m.closed:
		return nil, net.ErrClosed
	}
}

func (l *subListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *subListener) Addr() net.Addr { return l.m.ln.Addr() }

// raftLayer is the raft.StreamLayer over the mux.
type raftLayer struct {
	*subListener
	advertise net.Addr
}

func (l *raftLayer) Addr() net.Addr { return l.advertise }

func (l *raftLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return l.m.dialKind(ctx, string(addr), connRaft)
}
