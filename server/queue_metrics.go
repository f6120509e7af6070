package server

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Queue series, labelled by queue: queues are few and made by admins, so
// their names are bounded label values (a deleted queue's series go).
// The handlers count what this node answered (the leader, for a request
// a follower forwarded); dead-lettering, counted as applied, and the
// gauges of the node's applied state are package nodemetrics's.

func (m *Metrics) newQueueMetrics() []prometheus.Collector {
	byQueue := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"queue"})
	}
	m.QueueSent = byQueue("leasehold_queue_sent_total", "Messages enqueued by Sends this node answered (duplicates not counted).")
	m.QueueReceived = byQueue("leasehold_queue_received_total", "Deliveries handed out by Receives this node answered.")
	m.QueueRedelivered = byQueue("leasehold_queue_redelivered_total", "Deliveries of a message received before (after a visibility timeout or a Nack).")
	m.QueueAcked = byQueue("leasehold_queue_acked_total", "Messages acked through this node.")
	m.QueueNacked = byQueue("leasehold_queue_nacked_total", "Deliveries nacked through this node.")
	m.QueueRefused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "leasehold_queue_refused_total",
		Help: "Sends refused for backpressure, by queue and limit: max_depth, max_bytes, max_queue_bytes, max_queue_dedup_ids."},
		[]string{"queue", "limit"})
	m.QueueLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "leasehold_queue_end_to_end_seconds",
		Help:    "Seconds from a message's send to its ack, for acks answered by this node.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"queue"})
	return []prometheus.Collector{m.QueueSent, m.QueueReceived, m.QueueRedelivered, m.QueueAcked, m.QueueNacked,
		m.QueueRefused, m.QueueLatency}
}

// forgetQueue drops a deleted queue's series.
func (m *Metrics) forgetQueue(queue string) {
	l := prometheus.Labels{"queue": queue}
	for _, v := range []*prometheus.MetricVec{m.QueueSent.MetricVec, m.QueueReceived.MetricVec, m.QueueRedelivered.MetricVec,
		m.QueueAcked.MetricVec, m.QueueNacked.MetricVec, m.QueueRefused.MetricVec,
		m.QueueLatency.MetricVec} {
		v.DeletePartialMatch(l)
	}
}
