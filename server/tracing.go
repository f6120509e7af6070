package server

import (
	"context"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracerName names the server's spans' instrumentation scope.
const tracerName = "github.com/leasehold/leasehold/server"

// spans starts a server span for every API call, unary or stream,
// continuing the trace of the caller's W3C traceparent header: a
// client's, or a follower's forward span, so the leader's work joins the
// caller's trace. Spans carry the procedure, node and error code only,
// never a field of the request (secrets stay out of traces, invariant 9).
// A stream is one span, with an event per message (the SDK caps a span's
// events, so a long stream's span stays bounded).
type spans struct {
	tr     trace.Tracer
	nodeID string
}

func serverSpans(tr trace.Tracer, nodeID string) connect.Interceptor { return spans{tr, nodeID} }

func (s spans) start(ctx context.Context, procedure string, h http.Header) (context.Context, trace.Span) {
	ctx = propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(h))
	service, method, _ := strings.Cut(strings.TrimPrefix(procedure, "/"), "/")
	attrs := []attribute.KeyValue{
		attribute.String("rpc.system", "connect_rpc"),
		attribute.String("rpc.service", service),
		attribute.String("rpc.method", method),
		attribute.String("leasehold.node_id", s.nodeID),
	}
	if by := h.Get(forwardedHeader); by != "" {
		attrs = append(attrs, attribute.String("leasehold.forwarded_by", by))
	}
	return s.tr.Start(ctx, service+"/"+method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

func (s spans) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		ctx, span := s.start(ctx, req.Spec().Procedure, req.Header())
		defer span.End()
		res, err := next(ctx, req)
		spanError(span, err)
		return res, err
	}
}

func (s spans) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, span := s.start(ctx, conn.Spec().Procedure, conn.RequestHeader())
		defer span.End()
		err := next(ctx, &tracedHandlerConn{StreamingHandlerConn: conn, span: span})
		spanError(span, err)
		return err
	}
}

func (spans) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// tracedHandlerConn adds an event to its stream's span for each message.
type tracedHandlerConn struct {
	connect.StreamingHandlerConn
	span           trace.Span
	received, sent int64
}

func (c *tracedHandlerConn) Receive(m any) error {
	err := c.StreamingHandlerConn.Receive(m)
	if err == nil {
		c.received++
		messageEvent(c.span, "RECEIVED", c.received)
	}
	return err
}

func (c *tracedHandlerConn) Send(m any) error {
	err := c.StreamingHandlerConn.Send(m)
	if err == nil {
		c.sent++
		messageEvent(c.span, "SENT", c.sent)
	}
	return err
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
