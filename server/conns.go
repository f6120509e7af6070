package server

import (
	"context"
	"net"
	"sync"
)

// connLimiter is a listener that holds at most max connections open, and
// at most perClient from one IP address, so that one client cannot spend
// the node's file descriptors and /healthz, /readyz and admin calls keep
// answering for others. A connection over a limit is closed at once.
type connLimiter struct {
	net.Listener
	max, perClient int
	refused        func(reason string) // counts a refused connection

	mu       sync.Mutex
	open     int
	byClient map[string]int
}

func limitConns(l net.Listener, max, perClient int, refused func(string)) net.Listener {
	if max <= 0 && perClient <= 0 {
		return l
	}
	return &connLimiter{Listener: l, max: max, perClient: perClient, refused: refused, byClient: map[string]int{}}
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := clientIP(c.RemoteAddr().String())
		if reason := l.admit(ip); reason != "" {
			l.refused(reason)
			c.Close()
			continue
		}
		return &limitedConn{Conn: c, l: l, ip: ip}, nil
	}
}

// admit counts a new connection from ip, or names the limit it is over.
func (l *connLimiter) admit(ip string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.max > 0 && l.open >= l.max:
		return "max_conns"
	case l.perClient > 0 && l.byClient[ip] >= l.perClient:
		return "max_conns_per_client"
	}
	l.open++
	l.byClient[ip]++
	return ""
}

func (l *connLimiter) done(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.byClient[ip]--; l.byClient[ip] == 0 {
		delete(l.byClient, ip)
	}
}

// clientIP is the IP address of addr, a remote address ("ip:port").
func clientIP(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return host
}

// nodeListener is the listener of requests that other nodes forward to
// this one (over the raft port): they were charged to their callers where
// they arrived.
type nodeListener struct{ net.Listener }

type fromNodeKey struct{}

// baseContext is the parent context of the requests that arrive on l.
func (s *Server) baseContext(l net.Listener) context.Context {
	if _, ok := l.(nodeListener); ok {
		return context.WithValue(s.base, fromNodeKey{}, true)
	}
	return s.base
}

// fromNode says the request of ctx came from another node.
func fromNode(ctx context.Context) bool {
	v, _ := ctx.Value(fromNodeKey{}).(bool)
	return v
}

// limitedConn gives its place back when closed (once: net/http may close
// a connection twice).
type limitedConn struct {
	net.Conn
	l    *connLimiter
	ip   string
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.done(c.ip) })
	return err
}
