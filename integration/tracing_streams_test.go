package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/client/clientotel"
	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/internal/testutil"
)

// TestTraceStreams: each stream — a watch, an election's observation, a
// group member's assignments, the client's session stream carrying its
// lease calls — is one client
// span in the Go client and one server span on the node, in the same
// trace, the server's the child of the client's (traceparent sent when
// the stream opens); a stream's messages are events of its span. All but
// the shared session stream continue the caller's trace.
func TestTraceStreams(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	n := testcluster.StartNode(t, "", func(cfg *cluster.Config) { cfg.TracerProvider = tp })

	// The client's own transport: the session stream needs HTTP/2.
	cl, err := client.New(client.Config{Endpoints: []string{n.URL},
		Logger: testcluster.Logger(), RequestTimeout: 10 * time.Second, Tracing: clientotel.New(tp), Session: client.SessionOn})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			cl.Close()
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ctx, root := tp.Tracer("test").Start(ctx, "streams")
	traceID := root.SpanContext().TraceID()

	wctx, stopWatch := context.WithCancel(ctx)
	w := cl.Watch(wctx, []string{"trace/"})
	octx, stopObserve := context.WithCancel(ctx)
	obs := cl.Observe(octx, "trace/e")
	select {
	case <-obs.Leaders(): // the current leader (nobody yet)
	case <-ctx.Done():
		t.Fatal("no first leader from Observe")
	}
	l, err := cl.Acquire(ctx, "trace/x", client.TTL(30*time.Second), client.ManualRenew())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Events():
	case <-ctx.Done():
		t.Fatal("no watch event")
	}
	if _, err := cl.CreateGroup(ctx, "trace-g", 1); err != nil {
		t.Fatal(err)
	}
	m, err := cl.Join(ctx, "trace-g", "m1", client.TTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	actx, stopAssignments := context.WithCancel(ctx)
	as := m.Assignments(actx)
	select {
	case <-as.Updates():
	case <-ctx.Done():
		t.Fatal("no assignment update")
	}
	stopAssignments()
	as.Err()
	if err := m.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	stopWatch()
	stopObserve()
	w.Err()
	obs.Err()
	root.End()
	cl.Close() // ends the session stream
	closed = true

	// Each stream: a client span and the server's child span, one trace.
	check := func(procedure string, callersTrace bool) error {
		spans := exp.GetSpans()
		for _, c := range spans {
			if c.Name != procedure || c.SpanKind != trace.SpanKindClient {
				continue
			}
			if callersTrace && c.SpanContext.TraceID() != traceID {
				continue
			}
			for _, s := range spans {
				if s.Name == procedure && s.SpanKind == trace.SpanKindServer &&
					s.SpanContext.TraceID() == c.SpanContext.TraceID() && s.Parent.SpanID() == c.SpanContext.SpanID() {
					if len(s.Events) == 0 || len(c.Events) == 0 {
						return fmt.Errorf("%s: no message events (client %d, server %d)", procedure, len(c.Events), len(s.Events))
					}
					return nil
				}
			}
			var names []string
			for _, s := range spans {
				names = append(names, fmt.Sprint(s.Name, s.SpanKind, s.SpanContext.TraceID() == c.SpanContext.TraceID(), s.Parent.SpanID() == c.SpanContext.SpanID()))
			}
			return fmt.Errorf("%s: a client span but no server span under it: %v", procedure, names)
		}
		return fmt.Errorf("%s: no client span (caller's trace: %v) among %d spans", procedure, callersTrace, len(spans))
	}
	testutil.Eventually(t, 10*time.Second, "stream spans", func() error {
		for _, p := range []struct {
			procedure    string
			callersTrace bool
		}{
			{"leasehold.v1.Watch/Watch", true},
			{"leasehold.v1.Elections/Observe", true},
			{"leasehold.v1.Groups/Assignments", true},
			// Shared by the client's callers: a trace of its own.
			{"leasehold.v1.Sessions/Session", false},
		} {
			if err := check(p.procedure, p.callersTrace); err != nil {
				return err
			}
		}
		return nil
	})
}
