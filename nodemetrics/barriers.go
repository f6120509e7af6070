package nodemetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/fsm"
)

// barriersCollector reads the barriers' counts of this replica.
type barriersCollector struct{ n *cluster.Node }

var (
	barriersDesc = prometheus.NewDesc("leasehold_barriers",
		"Barriers and latches that exist (limit max_barriers).", nil, nil)
	barrierArrivedDesc = prometheus.NewDesc("leasehold_barrier_arrived",
		"Parties arrived (latches: counted down) in the current phases of every barrier.", nil, nil)
	barrierTripsDesc = prometheus.NewDesc("leasehold_barrier_trips_total",
		"Phases tripped, over the barriers that exist.", nil, nil)
	barrierBrokenDesc = prometheus.NewDesc("leasehold_barrier_broken_total",
		"Phases that ended broken (timed out or reset), over the barriers that exist.", nil, nil)
)

func (barriersCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{barriersDesc, barrierArrivedDesc, barrierTripsDesc, barrierBrokenDesc} {
		ch <- d
	}
}

func (c barriersCollector) Collect(ch chan<- prometheus.Metric) {
	var st fsm.BarrierStats
	c.n.ReadLocal(func(s *fsm.State) { st = s.BarrierStats() })
	ch <- prometheus.MustNewConstMetric(barriersDesc, prometheus.GaugeValue, float64(st.Barriers))
	ch <- prometheus.MustNewConstMetric(barrierArrivedDesc, prometheus.GaugeValue, float64(st.Arrived))
	ch <- prometheus.MustNewConstMetric(barrierTripsDesc, prometheus.CounterValue, float64(st.Trips))
	ch <- prometheus.MustNewConstMetric(barrierBrokenDesc, prometheus.CounterValue, float64(st.Broken))
}
