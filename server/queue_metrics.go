package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/fsm"
)

// Queue series, labelled by queue: queues are few and made by admins, so
// their names are bounded label values (a deleted queue's series go).
// The handlers count what this node answered (the leader, for a request
// a follower forwarded); dead-lettering counts as applied on this node;
// the gauges read this node's applied state at each scrape.

func (m *Metrics) newQueueMetrics() []prometheus.Collector {
	byQueue := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"queue"})
	}
	m.QueueSent = byQueue("leasehold_queue_sent_total", "Messages enqueued by Sends this node answered (duplicates not counted).")
	m.QueueReceived = byQueue("leasehold_queue_received_total", "Deliveries handed out by Receives this node answered.")
	m.QueueRedelivered = byQueue("leasehold_queue_redelivered_total", "Deliveries of a message received before (after a visibility timeout or a Nack).")
	m.QueueAcked = byQueue("leasehold_queue_acked_total", "Messages acked through this node.")
	m.QueueNacked = byQueue("leasehold_queue_nacked_total", "Deliveries nacked through this node.")
	m.QueueDeadLetters = byQueue("leasehold_queue_dead_lettered_total", "Messages moved to the dead letters after max_receives (applied on this node).")
	m.QueueRefused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "leasehold_queue_refused_total",
		Help: "Sends refused for backpressure, by queue and limit: max_depth, max_bytes, max_queue_bytes, max_queue_dedup_ids."},
		[]string{"queue", "limit"})
	m.QueueLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "leasehold_queue_end_to_end_seconds",
		Help:    "Seconds from a message's send to its ack, for acks answered by this node.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"queue"})
	return []prometheus.Collector{m.QueueSent, m.QueueReceived, m.QueueRedelivered, m.QueueAcked, m.QueueNacked,
		m.QueueDeadLetters, m.QueueRefused, m.QueueLatency}
}

// QueueDeadLettered makes Metrics a cluster.QueueEvents.
func (m *Metrics) QueueDeadLettered(queue string) { m.QueueDeadLetters.WithLabelValues(queue).Inc() }

var _ cluster.QueueEvents = (*Metrics)(nil)

// forgetQueue drops a deleted queue's series.
func (m *Metrics) forgetQueue(queue string) {
	l := prometheus.Labels{"queue": queue}
	for _, v := range []*prometheus.MetricVec{m.QueueSent.MetricVec, m.QueueReceived.MetricVec, m.QueueRedelivered.MetricVec,
		m.QueueAcked.MetricVec, m.QueueNacked.MetricVec, m.QueueDeadLetters.MetricVec, m.QueueRefused.MetricVec,
		m.QueueLatency.MetricVec} {
		v.DeletePartialMatch(l)
	}
}

// queueCollector reads each queue's counts from this node's applied state
// once per scrape.
type queueCollector struct{ n *cluster.Node }

var (
	queueDepthDesc = prometheus.NewDesc("leasehold_queue_depth",
		"Messages in the queue: queued, in flight and dead.", []string{"queue"}, nil)
	queueInFlightDesc = prometheus.NewDesc("leasehold_queue_in_flight",
		"Deliveries in flight.", []string{"queue"}, nil)
	queueDeadDesc = prometheus.NewDesc("leasehold_queue_dead_letters",
		"Dead letters waiting for a redrive or a purge.", []string{"queue"}, nil)
	queueBytesDesc = prometheus.NewDesc("leasehold_queue_bytes",
		"Bytes of message bodies in the queue (limit max_bytes).", []string{"queue"}, nil)
	queueOldestDesc = prometheus.NewDesc("leasehold_queue_oldest_age_seconds",
		"Age of the oldest message not dead (0 when none).", []string{"queue"}, nil)
)

func (queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{queueDepthDesc, queueInFlightDesc, queueDeadDesc, queueBytesDesc, queueOldestDesc} {
		ch <- d
	}
}

func (c queueCollector) Collect(ch chan<- prometheus.Metric) {
	var infos []fsm.QueueInfo
	c.n.ReadLocal(func(st *fsm.State) {
		for _, name := range st.Queues() {
			q, _ := st.Queue(name)
			infos = append(infos, q)
		}
	})
	now := time.Now()
	for _, q := range infos {
		age := 0.0
		if !q.OldestAt.IsZero() {
			age = max(0, now.Sub(q.OldestAt).Seconds())
		}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, q.Name)
		}
		gauge(queueDepthDesc, float64(q.Depth))
		gauge(queueInFlightDesc, float64(q.InFlight))
		gauge(queueDeadDesc, float64(q.Dead))
		gauge(queueBytesDesc, float64(q.Bytes))
		gauge(queueOldestDesc, age)
	}
}
