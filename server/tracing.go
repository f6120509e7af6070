package server

import (
	"context"
	"strings"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracerName names the server's spans' instrumentation scope.
const tracerName = "github.com/leasehold/leasehold/server"

// serverSpans starts a server span for every unary API call, continuing
// the trace of the caller's W3C traceparent header: a client's, or a
// follower's forward span, so the leader's work joins the caller's trace.
// Spans carry the procedure, node and error code only, never a field of
// the request (secrets stay out of traces, invariant 9).
func serverSpans(tr trace.Tracer, nodeID string) connect.UnaryInterceptorFunc {
	prop := propagation.TraceContext{}
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			ctx = prop.Extract(ctx, propagation.HeaderCarrier(req.Header()))
			service, method, _ := strings.Cut(strings.TrimPrefix(req.Spec().Procedure, "/"), "/")
			attrs := []attribute.KeyValue{
				attribute.String("rpc.system", "connect_rpc"),
				attribute.String("rpc.service", service),
				attribute.String("rpc.method", method),
				attribute.String("leasehold.node_id", nodeID),
			}
			if by := req.Header().Get(forwardedHeader); by != "" {
				attrs = append(attrs, attribute.String("leasehold.forwarded_by", by))
			}
			ctx, span := tr.Start(ctx, service+"/"+method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
			defer span.End()
			res, err := next(ctx, req)
			if err != nil {
				code := connect.CodeOf(err).String()
				span.SetAttributes(attribute.String("rpc.connect_rpc.error_code", code))
				span.SetStatus(codes.Error, code)
			}
			return res, err
		}
	}
}
