package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/client/clientotel"
	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/internal/testutil"
)

// TestTraceFollowsAcquireThroughForward: one acquire sent by the Go client
// to a follower of a 3-node cluster is one trace: the caller's span, the
// client's call span, the follower's server span, its forward to the
// leader, the leader's server span and the raft commit, each the child of
// the one before (the trace context crosses both hops as W3C
// traceparent headers).
func TestTraceFollowsAcquireThroughForward(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	c := testcluster.Start(t, 3, func(cfg *cluster.Config) { cfg.TracerProvider = tp })
	lead := c.WaitLeader(10 * time.Second)
	follower := (lead + 1) % 3

	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cl, err := client.New(client.Config{Endpoints: []string{c.URL(follower)}, HTTPClient: &http.Client{Transport: tr},
		Logger: testcluster.Logger(), RequestTimeout: 10 * time.Second, Tracing: clientotel.New(tp)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ctx, root := tp.Tracer("test").Start(ctx, "slow acquire")
	l, err := cl.Acquire(ctx, "trace/x", client.TTL(30*time.Second), client.ManualRenew())
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	traceID := root.SpanContext().TraceID()

	// The chain, from the commit up: each step's parent is the next one.
	type step struct {
		what  string
		match func(s tracetest.SpanStub) bool
	}
	attr := func(s tracetest.SpanStub, k, v string) bool {
		for _, a := range s.Attributes {
			if a.Key == attribute.Key(k) && a.Value.Emit() == v {
				return true
			}
		}
		return false
	}
	rpc := func(s tracetest.SpanStub) bool { return strings.HasPrefix(s.Name, "leasehold.v1.Leases/") }
	chain := []step{
		{"raft commit on the leader", func(s tracetest.SpanStub) bool { return s.Name == "raft commit" }},
		{"the leader's server span, forwarded by the follower", func(s tracetest.SpanStub) bool {
			return rpc(s) && s.SpanKind == trace.SpanKindServer && attr(s, "leasehold.node_id", c.ID(lead)) &&
				attr(s, "leasehold.forwarded_by", c.ID(follower))
		}},
		{"the follower's forward to the leader", func(s tracetest.SpanStub) bool {
			return s.Name == "forward to leader" && s.SpanKind == trace.SpanKindClient
		}},
		{"the follower's server span", func(s tracetest.SpanStub) bool {
			return rpc(s) && s.SpanKind == trace.SpanKindServer && attr(s, "leasehold.node_id", c.ID(follower))
		}},
		{"the client's call", func(s tracetest.SpanStub) bool { return rpc(s) && s.SpanKind == trace.SpanKindClient }},
		{"the caller's span", func(s tracetest.SpanStub) bool { return s.Name == "slow acquire" }},
	}
	testutil.Eventually(t, 10*time.Second, "trace incomplete", func() error {
		byID := map[trace.SpanID]tracetest.SpanStub{}
		var commit *tracetest.SpanStub
		for _, s := range exp.GetSpans() {
			if s.SpanContext.TraceID() != traceID {
				continue
			}
			byID[s.SpanContext.SpanID()] = s
			if chain[0].match(s) {
				commit = &s
			}
		}
		if commit == nil {
			return fmt.Errorf("no %s in the trace (%d spans)", chain[0].what, len(byID))
		}
		s := *commit
		for _, next := range chain[1:] {
			parent, ok := byID[s.Parent.SpanID()]
			if !ok || !next.match(parent) {
				return fmt.Errorf("the parent of %q (%s) is not %s", s.Name, s.SpanKind, next.what)
			}
			s = parent
		}
		return nil
	})
}

// BenchmarkTracingCost: one acquire and release through the Go client on
// a single node, without tracing and with every span recorded (the SDK
// with a batching in-memory exporter, as a node with --otlp-endpoint has).
func BenchmarkTracingCost(b *testing.B) {
	for _, traced := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "on"}[traced], func(b *testing.B) {
			var tp *sdktrace.TracerProvider
			opt := func(*cluster.Config) {}
			if traced {
				tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				b.Cleanup(func() { tp.Shutdown(context.Background()) })
				opt = func(cfg *cluster.Config) { cfg.TracerProvider = tp }
			}
			n := testcluster.StartNode(b, "", opt)
			cfg := client.Config{Endpoints: []string{n.URL}, Logger: testcluster.Logger()}
			if traced {
				cfg.Tracing = clientotel.New(tp)
			}
			cl, err := client.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { cl.Close() })
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l, err := cl.Acquire(ctx, fmt.Sprintf("bench/%d", i%64), client.TTL(30*time.Second), client.ManualRenew())
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
