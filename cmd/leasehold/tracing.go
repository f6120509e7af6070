package main

import (
	"context"
	"net/url"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// tracerProvider is the node's tracing: spans batched and exported over
// OTLP/HTTP when an endpoint is configured, else nil (no spans, no cost).
// endpoint is --otlp-endpoint, a base URL as OTEL_EXPORTER_OTLP_ENDPOINT
// is ("http://127.0.0.1:4318"; /v1/traces is added if it has no path).
// Without it the exporter's own variables decide (OTEL_EXPORTER_OTLP_ENDPOINT
// or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, with their headers, timeout and
// TLS variables), and the SDK's (OTEL_TRACES_SAMPLER, OTEL_BSP_*).
func tracerProvider(ctx context.Context, endpoint, nodeID string) (*sdktrace.TracerProvider, error) {
	return tracerProviderOf(ctx, endpoint, "leasehold", nodeID)
}

// tracerProviderOf is tracerProvider for the service named service (the
// node, or the CLI as a client).
func tracerProviderOf(ctx context.Context, endpoint, service, instance string) (*sdktrace.TracerProvider, error) {
	var opts []otlptracehttp.Option
	switch {
	case endpoint != "":
		u, err := url.Parse(endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usagef("--otlp-endpoint %q: give the collector's OTLP/HTTP URL, such as http://127.0.0.1:4318", endpoint)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces"
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
	case os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "":
		return nil, nil
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, err
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", service),
		attribute.String("service.instance.id", instance),
		attribute.String("service.version", buildVersion().Version),
	)
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}
