package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Partition group series. Members, rebalances, moves and lapses are read
// from the applied state at scrape time (the same on every node); the
// hand-off time is observed as this node applies each new grant.

func registerGroupMetrics(reg prometheus.Registerer, svc GroupsService) {
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	reg.MustRegister(
		gauge("leasehold_group_members", "Members with a live session, over every partition group.",
			func() float64 { return float64(svc.GroupStats().Members) }),
		gauge("leasehold_group_pending_revocations", "Partitions being revoked from their owner, waiting for its acknowledgement.",
			func() float64 { return float64(svc.GroupStats().Pending) }),
		counter("leasehold_group_rebalances_total", "Assignment changes of partition groups (of the groups that exist).",
			func() float64 { return float64(svc.GroupStats().Rebalances) }),
		counter("leasehold_group_partitions_moved_total", "Partitions moved from one member to another by a rebalance.",
			func() float64 { return float64(svc.GroupStats().Moved) }),
		counter("leasehold_group_revocations_lapsed_total", "Revocations not acknowledged in time, which ended the member's session.",
			func() float64 { return float64(svc.GroupStats().Lapsed) }))
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
