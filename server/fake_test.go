package server_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/server"
	"github.com/leasehold/leasehold/service"
)

// Handler tests on a fake service run no raft and no state machine: the
// server is given a fake service (the test's) and a fake front (a node
// that leads alone), and serves on loopback as a node does. What such a
// test sees is the handlers' own work: validation, authorization,
// conversion, error mapping, metrics.

// fakeFront is a node that leads a cluster of one and forwards nothing.
type fakeFront struct{ forward net.Listener }

func (fakeFront) IsLeader() bool                  { return true }
func (fakeFront) Leader() (id, raftAddr string)   { return "fake", "" }
func (fakeFront) Ready(context.Context) error     { return nil }
func (fakeFront) Fault() error                    { return nil }
func (f fakeFront) ForwardListener() net.Listener { return f.forward }
func (fakeFront) DialForward(context.Context, string) (net.Conn, error) {
	return nil, errors.New("a fake front has no peers")
}

// fakeNode is a server on svc and a fake front.
type fakeNode struct {
	URL      string
	Server   *server.Server
	Registry *prometheus.Registry
}

// startFake serves svc (a fake service: a struct embedding service.API,
// whose methods it does not set panic) until t ends.
func startFake(t testing.TB, svc service.API, opts ...func(*server.Config)) *fakeNode {
	t.Helper()
	api := testutil.Listen(t)
	reg := prometheus.NewRegistry()
	cfg := server.Config{Front: fakeFront{forward: testutil.Listen(t)}, Service: svc, Registry: reg,
		Metrics: server.NewMetrics(reg), Logger: testcluster.Logger(), NodeID: "fake", AdvertiseURL: "http://" + api.Addr().String()}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(api) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &fakeNode{URL: cfg.AdvertiseURL, Server: s, Registry: reg}
}
