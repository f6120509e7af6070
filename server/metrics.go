package server

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the API's Prometheus series: what the handlers answered on
// this node. Label values are outcome codes and reasons, never resource
// names or secrets. The queue series are labelled by queue name (see
// queue_metrics.go). The node's own series (what it applies, raft, its
// state's gauges) are package nodemetrics's.
type Metrics struct {
	Acquisitions      *prometheus.CounterVec // by outcome
	AcquireWait       prometheus.Histogram   // seconds a granted acquire waited
	RenewalFailures   *prometheus.CounterVec // by code
	ReleasedAfterLoss prometheus.Counter     // releases that found the lease gone
	FenceRejections   *prometheus.CounterVec // fenced writes and checks refused, by op
	ForcedReleases    prometheus.Counter     // forced releases this node carried out
	Refused           *prometheus.CounterVec // connections and requests refused by the node's own limits, by limit
	Txns              *prometheus.CounterVec // KV transactions answered by this node, by branch: then, else
	Campaigns         *prometheus.CounterVec // campaigns answered by this node, by outcome

	// Keyed queues (queue_metrics.go), by queue.
	QueueSent, QueueReceived, QueueRedelivered *prometheus.CounterVec
	QueueAcked, QueueNacked                    *prometheus.CounterVec
	QueueRefused                               *prometheus.CounterVec   // by queue and limit
	QueueLatency                               *prometheus.HistogramVec // send to ack
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
		RenewalFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_renewal_failures_total", Help: "Renew requests refused by this node, by code.",
		}, []string{"code"}),
		FenceRejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_fence_rejections_total", Help: "Fenced writes and fence checks refused for a stale token, by op (put, delete, txn, check).",
		}, []string{"op"}),
		ReleasedAfterLoss: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_released_after_loss_total", Help: "Releases that found the lease already gone: work finished after lease loss.",
		}),
		ForcedReleases: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_forced_releases_total", Help: "Leases an operator forced to release through this node (see the audit log).",
		}),
		Refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_refused_total", Help: "Connections and requests refused to protect the node, by limit: max_conns, max_conns_per_client, max_request_bytes, max_inflight_body_bytes, max_inflight_body_bytes_per_client, body_timeout, max_sessions.",
		}, []string{"limit"}),
		Txns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_kv_txns_total", Help: "KV transactions answered by this node, by the branch that ran: then (every compare held) or else.",
		}, []string{"branch"}),
		Campaigns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_campaigns_total", Help: "Campaigns answered by this node, by outcome: leading, invalid, or the error code.",
		}, []string{"outcome"}),
	}
	for _, c := range []prometheus.Collector{m.Acquisitions, m.AcquireWait, m.RenewalFailures, m.ReleasedAfterLoss,
		m.FenceRejections, m.ForcedReleases, m.Refused, m.Txns, m.Campaigns} {
		f(c)
	}
	for _, c := range m.newQueueMetrics() {
		f(c)
	}
	return m
}
