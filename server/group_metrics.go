package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Partition group series. Members, pending revocations, rebalances, moves
// and lapses are read from this node's applied state once per scrape (the
// same on every node, for the groups that exist); the hand-off time is
// observed as this node applies each new grant.

func registerGroupMetrics(reg prometheus.Registerer, svc GroupsService) {
	reg.MustRegister(groupsCollector{svc})
}

type groupsCollector struct{ svc GroupsService }

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
	st := c.svc.GroupStats()
	ch <- prometheus.MustNewConstMetric(groupMembersDesc, prometheus.GaugeValue, float64(st.Members))
	ch <- prometheus.MustNewConstMetric(groupPendingDesc, prometheus.GaugeValue, float64(st.Pending))
	ch <- prometheus.MustNewConstMetric(groupRebalancesDesc, prometheus.CounterValue, float64(st.Rebalances))
	ch <- prometheus.MustNewConstMetric(groupMovedDesc, prometheus.CounterValue, float64(st.Moved))
	ch <- prometheus.MustNewConstMetric(groupLapsedDesc, prometheus.CounterValue, float64(st.Lapsed))
}

func (m *Metrics) newGroupHandOff() prometheus.Histogram {
	m.groupHandOff = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "leasehold_group_handoff_seconds",
		Help:    "Time from a partition's revocation (or its owner's loss) to its next grant, on the leader's wall clock (applied on this node).",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)})
	return m.groupHandOff
}

// GroupHandedOff observes one hand-off (the machine calls it as it
// applies a grant).
func (m *Metrics) GroupHandedOff(wait time.Duration) { m.groupHandOff.Observe(wait.Seconds()) }
