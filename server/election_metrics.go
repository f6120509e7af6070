package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/fsm"
)

// Election series: the campaigns this node answered (Metrics.Campaigns),
// the leader changes it applied, and the elections its state holds.

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
