package nodemetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/service"
)

// WatchHub registers the watch hub's figures, read at scrape time, on the
// registry New was given.
func (m *Metrics) WatchHub(hub *service.Hub) {
	stat := func(f func(service.HubStats) float64) func() float64 {
		return func() float64 { return f(hub.Stats()) }
	}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "leasehold_watchers", Help: "Watch streams this node serves."},
			stat(func(s service.HubStats) float64 { return float64(s.Watchers) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "leasehold_watch_events_delivered_total",
			Help: "Change events handed to watchers on this node."},
			stat(func(s service.HubStats) float64 { return float64(s.Delivered) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "leasehold_watchers_cut_off_total",
			Help: "Watchers cut off for falling too far behind, or by a snapshot replacing this node's history."},
			stat(func(s service.HubStats) float64 { return float64(s.CutOff) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "leasehold_watch_lag_events",
			Help: "Events the furthest-behind watcher has yet to examine."},
			stat(func(s service.HubStats) float64 { return float64(s.MaxLag) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "leasehold_watch_history_events",
			Help: "Change events this node keeps for watches to resume from."},
			stat(func(s service.HubStats) float64 { return float64(s.Kept) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "leasehold_watch_history_oldest_index",
			Help: "The oldest log index a watch can resume from on this node."},
			stat(func(s service.HubStats) float64 { return float64(s.Oldest) })),
	)
}
