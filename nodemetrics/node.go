package nodemetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/fsm"
)

// WatchNode registers the series read from n at each scrape on the
// registry New was given: raft's progress (term, commit and applied
// index, applied lag, leader changes), whether n leads, and the leases,
// waiters, elections, queues, groups, barriers and idempotency keys of its applied
// state. Call it once, after cluster.Open.
func (m *Metrics) WatchNode(n *cluster.Node) {
	counts := func(f func(fsm.Counts) int) func() float64 {
		return func() float64 { return float64(f(n.Stats().Counts)) }
	}
	m.reg.MustRegister(raftCollector{n}, electionsCollector{n}, queueCollector{n}, groupsCollector{n}, barriersCollector{n},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "leasehold_leases_held", Help: "Leases currently held."},
			counts(func(c fsm.Counts) int { return c.Leases })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "leasehold_waiters", Help: "Acquires currently queued."},
			counts(func(c fsm.Counts) int { return c.Waiters })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "leasehold_is_leader", Help: "1 if this node leads the cluster."},
			func() float64 {
				if n.IsLeader() {
					return 1
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "leasehold_idem_keys", Help: "Idempotency keys in use (in progress or completed)."},
			counts(func(c fsm.Counts) int { return c.IdemKeys })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "leasehold_idem_stored_bytes", Help: "Bytes of stored idempotency results (limit max_idem_bytes)."},
			counts(func(c fsm.Counts) int { return c.IdemBytes })),
	)
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

// electionsCollector reads the elections of this node's applied state
// once per scrape (a walk over its leases: cheap next to the scrape).
type electionsCollector struct{ n *cluster.Node }

var (
	electionsDesc = prometheus.NewDesc("leasehold_elections",
		"Elections with a leader or candidates, in this node's applied state.", nil, nil)
	electionCandidatesDesc = prometheus.NewDesc("leasehold_election_candidates",
		"Candidates waiting to lead, over every election, in this node's applied state.", nil, nil)
)

func (electionsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- electionsDesc
	ch <- electionCandidatesDesc
}

func (c electionsCollector) Collect(ch chan<- prometheus.Metric) {
	var elections, candidates int
	c.n.ReadLocal(func(st *fsm.State) {
		es := st.Elections("")
		elections = len(es)
		for _, e := range es {
			candidates += e.Candidates
		}
	})
	ch <- prometheus.MustNewConstMetric(electionsDesc, prometheus.GaugeValue, float64(elections))
	ch <- prometheus.MustNewConstMetric(electionCandidatesDesc, prometheus.GaugeValue, float64(candidates))
}

// queueCollector reads each queue's counts from this node's applied state
// once per scrape. Queues are few and made by admins, so their names are
// bounded label values.
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

// groupsCollector reads the partition groups' totals from this node's
// applied state once per scrape (the same on every node, for the groups
// that exist); the hand-off time is observed as each grant is applied
// (GroupHandedOff).
type groupsCollector struct{ n *cluster.Node }

var (
	groupMembersDesc = prometheus.NewDesc("leasehold_group_members",
		"Members with a live session, over every partition group.", nil, nil)
	groupPendingDesc = prometheus.NewDesc("leasehold_group_pending_revocations",
		"Partitions being revoked from their owner, waiting for its acknowledgement.", nil, nil)
	groupRebalancesDesc = prometheus.NewDesc("leasehold_group_rebalances_total",
		"Assignment changes of the partition groups that exist.", nil, nil)
	groupMovedDesc = prometheus.NewDesc("leasehold_group_partitions_moved_total",
		"Partitions moved from one member to another (by a rebalance or a member's end).", nil, nil)
	groupLapsedDesc = prometheus.NewDesc("leasehold_group_revocations_lapsed_total",
		"Revocations not acknowledged in time, which ended the member's session.", nil, nil)
)

func (groupsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{groupMembersDesc, groupPendingDesc, groupRebalancesDesc, groupMovedDesc, groupLapsedDesc} {
		ch <- d
	}
}

func (c groupsCollector) Collect(ch chan<- prometheus.Metric) {
	var st fsm.GroupStats
	c.n.ReadLocal(func(s *fsm.State) { st = s.GroupStats() })
	ch <- prometheus.MustNewConstMetric(groupMembersDesc, prometheus.GaugeValue, float64(st.Members))
	ch <- prometheus.MustNewConstMetric(groupPendingDesc, prometheus.GaugeValue, float64(st.Pending))
	ch <- prometheus.MustNewConstMetric(groupRebalancesDesc, prometheus.CounterValue, float64(st.Rebalances))
	ch <- prometheus.MustNewConstMetric(groupMovedDesc, prometheus.CounterValue, float64(st.Moved))
	ch <- prometheus.MustNewConstMetric(groupLapsedDesc, prometheus.CounterValue, float64(st.Lapsed))
}
