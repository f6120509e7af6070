package client

import (
	"context"
	"strings"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// tracerName names the client's spans' instrumentation scope.
const tracerName = "github.com/leasehold/leasehold/client"

// clientSpans starts a client span for every unary call attempt and sends
// its context in the W3C traceparent header, so the node's spans (and the
// leader's, when the node forwards) join the caller's trace.
func clientSpans(tr trace.Tracer) connect.UnaryInterceptorFunc {
	prop := propagation.TraceContext{}
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			service, method, _ := strings.Cut(strings.TrimPrefix(req.Spec().Procedure, "/"), "/")
			ctx, span := tr.Start(ctx, service+"/"+method, trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(attribute.String("rpc.system", "connect_rpc"),
					attribute.String("rpc.service", service), attribute.String("rpc.method", method)))
			defer span.End()
			prop.Inject(ctx, propagation.HeaderCarrier(req.Header()))
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

// sharedBatchSpan starts the span of a batch request sent on behalf of
// several callers: it belongs to no caller's trace alone, so it links to
// each. Without a tracer it returns ctx and a span that does nothing.
func (c *Client) sharedBatchSpan(ctx context.Context, batch []*batchCall) (context.Context, trace.Span) {
	if c.tracer == nil {
		return ctx, noop.Span{}
	}
	links := make([]trace.Link, 0, len(batch))
	for _, bc := range batch {
		if sc := trace.SpanContextFromContext(bc.ctx); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	return c.tracer.Start(ctx, "leasehold.client shared batch", trace.WithLinks(links...),
		trace.WithAttributes(attribute.Int("leasehold.calls", len(batch))))
}
