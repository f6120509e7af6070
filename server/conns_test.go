package server_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/server"
)

// trickle opens a connection from src that sends the start of a request
// head and then nothing, as a slow client does.
func trickle(t *testing.T, n *testcluster.Node, src string) net.Conn {
	t.Helper()
	c := rawConn(t, n, src)
	io.WriteString(c, "POST /leasehold.v1.Leases/Acquire HTTP/1.1\r\nHost: x\r\n")
	return c
}

// closedSoon reports whether the server closed c within d, without
// answering; false if c is still open after d.
func closedSoon(t *testing.T, c net.Conn, d time.Duration) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return false
	case err == nil:
		t.Fatal("the server answered a request that was never sent")
	}
	return true // EOF or reset
}

// One address that opens connections and trickles on them cannot take the
// node's connections: past its own limit its connections are closed at
// once, and /healthz, /readyz, an acquire and an admin call from another
// address still answer.
func TestConnLimitPerClient(t *testing.T) {
	t.Parallel()
	const perClient = 50
	n := testcluster.StartServerNode(t, func(c *server.Config) {
		c.MaxConns = 3 * perClient
		c.MaxConnsPerClient = perClient
	})
	for i := range perClient {
		c := trickle(t, n, "127.0.0.1")
		if i == 0 && closedSoon(t, c, 200*time.Millisecond) {
			t.Fatal("the first connection was closed")
		}
	}
	// The server counts a connection when it accepts it: poll until the
	// next one from the same address is refused.
	deadline := time.Now().Add(10 * time.Second)
	for !closedSoon(t, trickle(t, n, "127.0.0.1"), time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("127.0.0.1 holds more than %d connections", perClient)
		}
	}
	for range 3 * perClient {
		trickle(t, n, "127.0.0.1") // all closed at once
	}

	hc := clientFrom(t, "127.0.0.2")
	for _, path := range []string{"/healthz", "/readyz"} {
		res, err := hc.Get(n.URL + path)
		if err != nil {
			t.Fatalf("%s from another address: %v", path, err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s from another address: status %d", path, res.StatusCode)
		}
	}
	lc := leaseholdv1connect.NewLeasesClient(hc, n.URL)
	a := mustAcquire(t, lc, &pb.AcquireRequest{Resources: []string{"conns/a"}, Ttl: dur(time.Minute)})
	mustRelease(t, lc, a)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if _, err := leaseholdv1connect.NewClusterClient(hc, n.URL).Status(ctx, connect.NewRequest(&pb.StatusRequest{})); err != nil {
		t.Fatalf("Cluster.Status from another address: %v", err)
	}
	wantMetric(t, n, `leasehold_refused_total{limit="max_conns_per_client"}`)
}

// The node holds at most MaxConns connections in all.
func TestConnLimitTotal(t *testing.T) {
	t.Parallel()
	n := testcluster.StartServerNode(t, func(c *server.Config) {
		c.MaxConns = 20
		c.MaxConnsPerClient = 10
	})
	for _, src := range []string{"127.0.0.2", "127.0.0.3"} {
		for range 10 {
			trickle(t, n, src)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for !closedSoon(t, trickle(t, n, "127.0.0.4"), time.Second) {
		if time.Now().After(deadline) {
			t.Fatal("the node holds more than 20 connections")
		}
	}
}

// wantMetric fails t unless the node's /metrics shows series with a
// non-zero value.
func wantMetric(t *testing.T, n *testcluster.Node, series string) {
	t.Helper()
	if v := metricValue(t, n, series); v == 0 {
		t.Fatalf("/metrics has no non-zero %s", series)
	}
}

// metricValue reads series (name and labels, as /metrics prints them)
// from the node's /metrics; 0 if it is not there.
func metricValue(t *testing.T, n *testcluster.Node, series string) int64 {
	t.Helper()
	// From an address of its own, which the connection tests leave alone.
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.9")}, Timeout: 5 * time.Second}
	hc := &http.Client{Timeout: callTimeout, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	res, err := hc.Get(n.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return int64(f)
		}
	}
	return 0
}
