package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/fsm"
)

// Metrics are the server's Prometheus series. Label values are outcome
// codes and reasons, never resource names or secrets. Counters about
// applied changes (grants, expiries) count on every node as it applies.
// The queue series are labelled by queue name (see queue_metrics.go).
type Metrics struct {
	Acquisitions      *prometheus.CounterVec // by outcome
	AcquireWait       prometheus.Histogram   // seconds a granted acquire waited
	LeasesGranted     prometheus.Counter
	LeasesEnded       *prometheus.CounterVec // by reason: released, expired, canceled, forced
	Renewals          prometheus.Counter
	RenewalFailures   *prometheus.CounterVec // by code
	ReleasedAfterLoss prometheus.Counter     // releases that found the lease gone
	FenceRejections   *prometheus.CounterVec // fenced writes and checks refused, by op
	ForcedReleases    prometheus.Counter     // forced releases this node carried out
	CommitLatency     prometheus.Histogram   // seconds from raft.Apply to applied, per log entry
	Refused           *prometheus.CounterVec // connections and requests refused by the node's own limits, by limit
	Txns              *prometheus.CounterVec // KV transactions answered by this node, by branch: then, else
	Campaigns         *prometheus.CounterVec // campaigns answered by this node, by outcome
	LeaderChanges     prometheus.Counter     // election leader changes (applied on this node)

	// Keyed queues (queue_metrics.go), by queue.
	QueueSent, QueueReceived, QueueRedelivered *prometheus.CounterVec
	QueueAcked, QueueNacked, QueueDeadLetters  *prometheus.CounterVec
	QueueRefused                               *prometheus.CounterVec   // by queue and limit
	QueueLatency                               *prometheus.HistogramVec // send to ack

	idemLapsed   prometheus.Counter   // idempotency attempts whose lease expired (idem.go)
	groupHandOff prometheus.Histogram // partition hand-off time (group_metrics.go)

	reg prometheus.Registerer // for WatchNode
}

// NewMetrics registers the series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	m := &Metrics{
		reg: reg,
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
			Name: "leasehold_leases_ended_total", Help: "Leases ended (applied on this node), by reason: released, expired, canceled, forced.",
		}, []string{"reason"}),
		Renewals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_renewals_total", Help: "Successful renewals (applied on this node).",
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
		CommitLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "leasehold_raft_commit_seconds", Help: "How long log entries proposed by this node took from raft.Apply until applied (or failed).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
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
		LeaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_election_leader_changes_total", Help: "Election leader changes: a new leader, a proclaimed value, or nobody leading (applied on this node).",
		}),
	}
	for _, c := range []prometheus.Collector{m.Acquisitions, m.AcquireWait, m.LeasesGranted, m.LeasesEnded, m.Renewals,
		m.RenewalFailures, m.ReleasedAfterLoss, m.FenceRejections, m.ForcedReleases, m.CommitLatency, m.Refused, m.Txns,
		m.Campaigns, m.LeaderChanges, m.newIdemLapsed(), m.newGroupHandOff()} {
		f(c)
	}
	for _, c := range m.newQueueMetrics() {
		f(c)
	}
	return m
}

// Granted, Renewed and Ended make Metrics a cluster.Events.
func (m *Metrics) Granted(*leasehold.Lease) { m.LeasesGranted.Inc() }

func (m *Metrics) Renewed(*leasehold.Lease) { m.Renewals.Inc() }

func (m *Metrics) Ended(l *leasehold.Lease, why fsm.EndReason) {
	m.LeasesEnded.WithLabelValues(why.String()).Inc()
	m.idemEnded(l, why)
}

// ObserveCommit records one log entry's commit latency; it is meant for
// cluster.Config.CommitLatency.
func (m *Metrics) ObserveCommit(d time.Duration) { m.CommitLatency.Observe(d.Seconds()) }

// WatchNode registers the raft health series of n (term, commit and
// applied index, applied lag, leader changes) on the registry NewMetrics
// was given. Call it once, after cluster.Open.
func (m *Metrics) WatchNode(n *cluster.Node) {
	m.reg.MustRegister(raftCollector{n}, electionsCollector{n}, queueCollector{n})
}

// raftCollector reads raft's progress once per scrape.
type raftCollector struct{ n *cluster.Node }

var (
	raftTermDesc = prometheus.NewDesc("leasehold_raft_term",
		"This node's current raft term; it grows with every election.", nil, nil)
	raftCommitDesc = prometheus.NewDesc("leasehold_raft_commit_index",
		"The highest log index this node knows to be committed.", nil, nil)
	raftAppliedDesc = prometheus.NewDesc("leasehold_raft_applied_index",
		"The highest log index this node has applied to its state.", nil, nil)
	raftLagDesc = prometheus.NewDesc("leasehold_raft_applied_lag",
		"Committed log entries this node has not applied yet (commit index minus applied index).", nil, nil)
	raftLeaderChangesDesc = prometheus.NewDesc("leasehold_raft_leader_changes_total",
		"Times this node gained or lost leadership since it started.", nil, nil)
)

func (raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{raftTermDesc, raftCommitDesc, raftAppliedDesc, raftLagDesc, raftLeaderChangesDesc} {
		ch <- d
	}
}

func (c raftCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.n.LocalStatus()
	lag := uint64(0)
	if st.CommitIndex > st.AppliedIndex {
		lag = st.CommitIndex - st.AppliedIndex
	}
	ch <- prometheus.MustNewConstMetric(raftTermDesc, prometheus.GaugeValue, float64(st.Term))
	ch <- prometheus.MustNewConstMetric(raftCommitDesc, prometheus.GaugeValue, float64(st.CommitIndex))
	ch <- prometheus.MustNewConstMetric(raftAppliedDesc, prometheus.GaugeValue, float64(st.AppliedIndex))
	ch <- prometheus.MustNewConstMetric(raftLagDesc, prometheus.GaugeValue, float64(lag))
	ch <- prometheus.MustNewConstMetric(raftLeaderChangesDesc, prometheus.CounterValue, float64(c.n.LeaderChanges()))
}
