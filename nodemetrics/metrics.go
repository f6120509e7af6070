// Package nodemetrics holds a node's own Prometheus series: what its
// state machine applies (grants, renewals, lease ends, election leader
// changes, dead letters, partition hand-offs, lapsed idempotency
// attempts), how long its proposals take to commit, its raft progress,
// and gauges read from its applied state and its watch hub at each scrape.
// The API's series (what the handlers answered) are package server's.
//
// Counters about applied changes count on every node as it applies, so
// each node reports the same for the same log. Label values are reasons
// and queue names, never resource names or secrets.
package nodemetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/fsm"
)

// Metrics are the node's series. It is the cluster.Events (and
// cluster.QueueEvents) a node is opened with, and its commit-latency and
// history hooks (ObserveCommit, CountLeaderChanges).
type Metrics struct {
	LeasesGranted    prometheus.Counter
	LeasesEnded      *prometheus.CounterVec // by reason: released, expired, canceled, forced
	Renewals         prometheus.Counter
	CommitLatency    prometheus.Histogram   // seconds from raft.Apply to applied, per log entry
	LeaderChanges    prometheus.Counter     // election leader changes (applied on this node)
	QueueDeadLetters *prometheus.CounterVec // by queue
	IdemLapsed       prometheus.Counter     // idempotency attempts whose lease expired
	GroupHandOff     prometheus.Histogram   // partition hand-off time

	reg prometheus.Registerer // for WatchNode and WatchHub
}

var (
	_ cluster.Events      = (*Metrics)(nil)
	_ cluster.QueueEvents = (*Metrics)(nil)
)

// New registers the series on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reg: reg,
		LeasesGranted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_leases_granted_total", Help: "Leases granted (applied on this node).",
		}),
		LeasesEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_leases_ended_total", Help: "Leases ended (applied on this node), by reason: released, expired, canceled, forced.",
		}, []string{"reason"}),
		Renewals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_renewals_total", Help: "Successful renewals (applied on this node).",
		}),
		CommitLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "leasehold_raft_commit_seconds", Help: "How long log entries proposed by this node took from raft.Apply until applied (or failed).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
		LeaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_election_leader_changes_total", Help: "Election leader changes: a new leader, a proclaimed value, or nobody leading (applied on this node).",
		}),
		QueueDeadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_queue_dead_lettered_total", Help: "Messages moved to the dead letters after max_receives (applied on this node).",
		}, []string{"queue"}),
		IdemLapsed: prometheus.NewCounter(prometheus.CounterOpts{Name: "leasehold_idem_lapsed_total",
			Help: "Idempotency attempts whose lease expired before Complete or Abandon (applied on this node)."}),
		GroupHandOff: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "leasehold_group_handoff_seconds",
			Help:    "Time from a partition's revocation (or its owner's loss) to its next grant, on the leader's wall clock (applied on this node).",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
	}
	reg.MustRegister(m.LeasesGranted, m.LeasesEnded, m.Renewals, m.CommitLatency, m.LeaderChanges, m.QueueDeadLetters,
		m.IdemLapsed, m.GroupHandOff)
	return m
}

// Granted, Renewed and Ended make Metrics a cluster.Events.
func (m *Metrics) Granted(*leasehold.Lease) { m.LeasesGranted.Inc() }

func (m *Metrics) Renewed(*leasehold.Lease) { m.Renewals.Inc() }

func (m *Metrics) Ended(l *leasehold.Lease, why fsm.EndReason) {
	m.LeasesEnded.WithLabelValues(why.String()).Inc()
	if why != fsm.EndExpired || len(l.Resources) != 1 {
		return
	}
	if _, ok := leasehold.IdemKeyOf(l.Resources[0]); ok {
		m.IdemLapsed.Inc() // an idempotency attempt lapsed
	}
}

// QueueDeadLettered makes Metrics a cluster.QueueEvents.
func (m *Metrics) QueueDeadLettered(queue string) { m.QueueDeadLetters.WithLabelValues(queue).Inc() }

// ForgetQueue drops a deleted queue's series.
func (m *Metrics) ForgetQueue(queue string) {
	m.QueueDeadLetters.DeletePartialMatch(prometheus.Labels{"queue": queue})
}

// GroupHandedOff observes one hand-off (the machine calls it as it
// applies a grant).
func (m *Metrics) GroupHandedOff(wait time.Duration) { m.GroupHandOff.Observe(wait.Seconds()) }

// ObserveCommit records one log entry's commit latency; it is meant for
// cluster.Config.CommitLatency.
func (m *Metrics) ObserveCommit(d time.Duration) { m.CommitLatency.Observe(d.Seconds()) }

// CountLeaderChanges returns next (the node's watch history), counting
// each leader change the state machine reports on its way: meant for
// cluster.Config.History.
func (m *Metrics) CountLeaderChanges(next cluster.History) cluster.History {
	return leaderChangeCounter{History: next, m: m}
}

type leaderChangeCounter struct {
	cluster.History
	m *Metrics
}

func (c leaderChangeCounter) Event(e fsm.Event) {
	if e.Kind == fsm.EventLeaderChanged {
		c.m.LeaderChanges.Inc()
	}
	c.History.Event(e)
}
