// Package clientotel traces the Go client's calls with OpenTelemetry:
// client.Config{Tracing: clientotel.New(tp)}. Every call attempt, unary or
// stream, gets a client span, and its context goes to the node in the W3C
// traceparent header, so the node's spans (and the leader's, when the node
// forwards) join the caller's trace. It is a module of its own
// (github.com/leasehold/leasehold/client/clientotel), so a program that
// uses the client without tracing does not pull OpenTelemetry's modules.
package clientotel

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/client"
)

// tracerName names the client's spans' instrumentation scope.
const tracerName = "github.com/leasehold/leasehold/client"

// New returns the client's Tracing with tp's tracer: a client span for
// every call attempt, unary or stream, whose context is sent in the W3C
// traceparent header. A stream is one span, from its opening until its
// response is closed or ends, with an event per message.
func New(tp trace.TracerProvider) client.Tracing { return spans{tp.Tracer(tracerName)} }

type spans struct{ tr trace.Tracer }

func (s spans) Interceptor() connect.Interceptor { return s }

func (s spans) start(ctx context.Context, procedure string) (context.Context, trace.Span) {
	service, method, _ := strings.Cut(strings.TrimPrefix(procedure, "/"), "/")
	return s.tr.Start(ctx, service+"/"+method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("rpc.system", "connect_rpc"),
			attribute.String("rpc.service", service), attribute.String("rpc.method", method)))
}

// inject sends ctx's span in the W3C traceparent header.
func inject(ctx context.Context, h http.Header) {
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
}

func (s spans) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		ctx, span := s.start(ctx, req.Spec().Procedure)
		defer span.End()
		inject(ctx, req.Header())
		res, err := next(ctx, req)
		spanError(span, err)
		return res, err
	}
}

func (s spans) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		ctx, span := s.start(ctx, spec.Procedure)
		conn := next(ctx, spec)
		inject(ctx, conn.RequestHeader()) // sent with the first message
		return &tracedClientConn{StreamingClientConn: conn, span: span}
	}
}

func (spans) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// tracedClientConn adds an event to its stream's span for each message,
// and ends the span when the stream ends: its response closed, or a
// Receive failed (io.EOF included).
type tracedClientConn struct {
	connect.StreamingClientConn
	span           trace.Span
	received, sent int64
	end            sync.Once
}

func (c *tracedClientConn) Send(m any) error {
	err := c.StreamingClientConn.Send(m)
	if err == nil {
		c.sent++
		messageEvent(c.span, "SENT", c.sent)
	}
	return err
}

func (c *tracedClientConn) Receive(m any) error {
	err := c.StreamingClientConn.Receive(m)
	if err != nil {
		c.finish(err)
		return err
	}
	c.received++
	messageEvent(c.span, "RECEIVED", c.received)
	return nil
}

func (c *tracedClientConn) CloseResponse() error {
	err := c.StreamingClientConn.CloseResponse()
	c.finish(nil)
	return err
}

func (c *tracedClientConn) finish(err error) {
	c.end.Do(func() {
		if !errors.Is(err, io.EOF) {
			spanError(c.span, err)
		}
		c.span.End()
	})
}

// messageEvent records a stream's message as OpenTelemetry's RPC
// conventions name it: "message", with its direction and number.
func messageEvent(span trace.Span, typ string, id int64) {
	span.AddEvent("message", trace.WithAttributes(attribute.String("message.type", typ), attribute.Int64("message.id", id)))
}

// spanError marks a span failed with the call's Connect code.
func spanError(span trace.Span, err error) {
	if err != nil {
		code := connect.CodeOf(err).String()
		span.SetAttributes(attribute.String("rpc.connect_rpc.error_code", code))
		span.SetStatus(codes.Error, code)
	}
}

// SharedRequest starts the span of a batch request sent on behalf of
// several callers: it belongs to no caller's trace alone, so it links to
// each.
func (s spans) SharedRequest(ctx context.Context, callers []context.Context) (context.Context, func()) {
	links := make([]trace.Link, 0, len(callers))
	for _, cctx := range callers {
		if sc := trace.SpanContextFromContext(cctx); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	ctx, span := s.tr.Start(ctx, "leasehold.client shared batch", trace.WithLinks(links...),
		trace.WithAttributes(attribute.Int("leasehold.calls", len(callers))))
	return ctx, func() { span.End() }
}
