package service

import (
	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/fsm"
)

// GroupRebalances is each partition group's rebalance count in n's applied
// state, for at most limit groups (the first by name): the dashboard's
// per-group charts sample it (ui.Config.GroupRebalances).
func GroupRebalances(n *cluster.Node, limit int) map[string]uint64 {
	out := map[string]uint64{}
	n.ReadLocal(func(st *fsm.State) {
		gs := st.Groups("")
		for _, g := range gs[:min(len(gs), limit)] {
			out[g.Name] = g.Rebalances
		}
	})
	return out
}
