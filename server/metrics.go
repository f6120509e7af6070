package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fsm"
)

// Metrics are the server's Prometheus series. Label values are outcome
// codes and reasons, never resource names or secrets. Counters about
// applied changes (grants, expiries) count on every node as it applies.
type Metrics struct {
	Acquisitions      *prometheus.CounterVec // by outcome
	AcquireWait       prometheus.Histogram   // seconds a granted acquire waited
	LeasesGranted     prometheus.Counter
	LeasesEnded       *prometheus.CounterVec // by reason: released, expired, canceled
	Renewals          prometheus.Counter
	RenewalFailures   *prometheus.CounterVec // by code
	ReleasedAfterLoss prometheus.Counter     // releases that found the lease gone
	FenceRejections   *prometheus.CounterVec // fenced writes and checks refused, by op
	Held              prometheus.Gauge
	Waiters           prometheus.Gauge
}

// NewMetrics registers the series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	m := &Metrics{
		Acquisitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_acquisitions_total", Help: "Acquire requests answered by this node, by outcome.",
		}, []string{"outcome"}),
		AcquireWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "leasehold_acquire_wait_seconds", Help: "How long acquires answered by this node took, queueing included.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}),
		LeasesGranted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_leases_granted_total", Help: "Leases granted (applied on this node).",
		}),
		LeasesEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_leases_ended_total", Help: "Leases ended (applied on this node), by reason.",
		}, []string{"reason"}),
		Renewals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_renewals_total", Help: "Successful renewals (applied on this node).",
		}),
		RenewalFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_renewal_failures_total", Help: "Renew requests refused by this node, by code.",
		}, []string{"code"}),
		FenceRejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_fence_rejections_total", Help: "Fenced writes and fence checks refused for a stale token, by op (put, delete, check).",
		}, []string{"op"}),
		ReleasedAfterLoss: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_released_after_loss_total", Help: "Releases that found the lease already gone: work finished after lease loss.",
		}),
	}
	for _, c := range []prometheus.Collector{m.Acquisitions, m.AcquireWait, m.LeasesGranted, m.LeasesEnded, m.Renewals,
		m.RenewalFailures, m.ReleasedAfterLoss, m.FenceRejections} {
		f(c)
	}
	return m
}

// Granted, Renewed and Ended make Metrics a cluster.Events.
func (m *Metrics) Granted(*leasehold.Lease) { m.LeasesGranted.Inc() }

func (m *Metrics) Renewed(*leasehold.Lease) { m.Renewals.Inc() }

func (m *Metrics) Ended(_ *leasehold.Lease, why fsm.EndReason) {
	m.LeasesEnded.WithLabelValues(why.String()).Inc()
}
