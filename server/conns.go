package server

import (
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
		ip := clientIP(c.RemoteAddr())
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

func clientIP(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
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
