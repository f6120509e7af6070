package client

import (
	"context"

	"connectrpc.com/connect"
)

// Metrics counts what the client sees happen to its leases. Set
// Config.Metrics to one; package clientprom (module
// github.com/leasehold/leasehold/client/clientprom) counts into a
// Prometheus registry under the names leasehold_client_*. The client
// itself imports no metrics library, so a program that does not count
// pulls none into its build. An implementation embeds NoMetrics to keep
// compiling when a count is added here.
type Metrics interface {
	// Acquisition counts one Acquire call by its outcome: "granted",
	// "degraded" (FailOpen), or the name of its error's code
	// (leasehold.CodeOf(err).String()).
	Acquisition(outcome string)
	// RenewalFailure counts a renewal attempt that failed.
	RenewalFailure()
	// LeaseLost counts a lease that ended before its holder released it.
	LeaseLost()
	// WorkAfterLoss counts a release that found the lease already gone:
	// work finished after the lease was lost.
	WorkAfterLoss()
	// Degraded counts a lease handed out, or kept past its deadline,
	// degraded (token 0) under FailOpen.
	Degraded()
}

// NoMetrics counts nothing: the client's Metrics when Config.Metrics is
// nil.
type NoMetrics struct{}

func (NoMetrics) Acquisition(string) {}
func (NoMetrics) RenewalFailure()    {}
func (NoMetrics) LeaseLost()         {}
func (NoMetrics) WorkAfterLoss()     {}
func (NoMetrics) Degraded()          {}

// Tracing traces the client's calls. Set Config.Tracing to one; package
// clientotel (module github.com/leasehold/leasehold/client/clientotel)
// traces with an OpenTelemetry TracerProvider and sends each call's
// context to the node (W3C traceparent), so a slow call can be followed
// through the node, its forward to the leader and the raft commit. The
// client itself imports no tracing library.
type Tracing interface {
	// Interceptor wraps every call attempt, unary or stream.
	Interceptor() connect.Interceptor
	// SharedRequest starts the span of one request sent on behalf of
	// several callers (the acquires, renewals and releases of callers
	// batched together), which belongs to no caller's trace alone: it
	// links to the span of each caller's context. It returns the context
	// to send the request under and the function that ends the span.
	SharedRequest(ctx context.Context, callers []context.Context) (context.Context, func())
}
