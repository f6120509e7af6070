package testutil

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"
)

// HTTPClientFrom is an HTTP/2-without-TLS client (as gRPC speaks) whose
// connections leave from the loopback address ip (127.0.0.2, ...): a
// caller that a node tells apart from others on 127.0.0.1 by its address.
func HTTPClientFrom(t testing.TB, ip string) *http.Client {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}
