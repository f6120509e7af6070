package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
)

// clientTracing gives a client command's calls spans when an OTLP
// endpoint is configured (--otlp-endpoint, or the OTEL_EXPORTER_OTLP_*
// variables serve reads too): the client's span of each call sends
// traceparent, so the nodes' spans join the command's trace. Without one
// it does nothing.
func (g *globals) clientTracing() error {
	if g.tracingDone {
		return nil
	}
	g.tracingDone = true
	host, _ := os.Hostname()
	tp, err := tracerProviderOf(context.Background(), g.otlpEndpoint, "leasehold-cli", fmt.Sprintf("%s/%d", host, os.Getpid()))
	g.tp = tp
	return err
}

// commandSpan makes ctx carry one span for the whole command (named by its
// path, "leasehold acquire"), so that its calls are one trace.
func (g *globals) commandSpan(ctx context.Context, cmd *cobra.Command) context.Context {
	if g.tp == nil || g.span != nil {
		return ctx
	}
	ctx, g.span = g.tp.Tracer("github.com/leasehold/leasehold/cmd/leasehold").Start(ctx, cmd.CommandPath())
	return ctx
}

// flushTraces ends the command's span and sends the spans still batched
// before the process exits, waiting at most 5s for the collector.
func (g *globals) flushTraces() {
	if g.tp == nil {
		return
	}
	if g.span != nil {
		g.span.End()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.tp.Shutdown(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "leasehold: could not send the traces:", err)
	}
}
