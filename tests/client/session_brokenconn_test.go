package client_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/server"
)

// TestStreamEndsWhenItsConnectionBreaksAfterItsCallerLeft: a session
// stream whose HTTP/1.1 connection breaks before the node answers (here a
// node refusing a client without a certificate, which TLS 1.3 tells the
// client only after the handshake), and whose caller has left, ends within
// about RequestTimeout. It used to wait for ever: net/http waits for the
// request body to end before it reports the broken connection, the body
// ends only when the stream is canceled, and the watchdog looked only at
// ops still waiting for an answer. The server package's goleak caught the
// goroutines such a client leaked.
func TestStreamEndsWhenItsConnectionBreaksAfterItsCallerLeft(t *testing.T) {
	cs := testcluster.NewCerts(t)
	n := testcluster.StartServerNode(t, func(c *server.Config) {
		c.TLS = &tls.Config{Certificates: []tls.Certificate{cs.Server}, ClientCAs: cs.CAPool, ClientAuth: tls.RequireAndVerifyClientCert}
	})
	// HTTP/1.1 over TLS, without a client certificate.
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cs.CAPool}}
	t.Cleanup(tr.CloseIdleConnections)
	const requestTimeout = 500 * time.Millisecond
	before := sessionRunners()
	for i := range 3 { // the refusal races the request: try a few clients
		c := newClient(t, client.Config{HTTPClient: &http.Client{Transport: tr}, Session: client.SessionOn,
			RequestTimeout: requestTimeout}, n.HTTPSURL())
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout/2)
		_, err := c.Acquire(ctx, "stream/refused", client.TTL(time.Minute))
		cancel()
		if err == nil {
			t.Fatalf("client %d without a certificate was served", i)
		}
	}
	eventually(t, 4*requestTimeout, "the streams whose callers left end", func() bool {
		return sessionRunners() <= before
	})
}

// sessionRunners counts the goroutines that run a client's session stream.
func sessionRunners() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Count(buf[:n], []byte("leasehold/client.(*session).run("))
		}
		buf = make([]byte, 2*len(buf))
	}
}
