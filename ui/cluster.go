package ui

import (
	"net/http"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
)

// nodeRow is one member as the cluster view shows it.
type nodeRow struct {
	ID, RaftAddr, State, Leader, LastContact, Error string
	Voter                                           bool
	Term, Commit, Applied, Last, Lag                uint64
}

func (d *Dashboard) nodes(r *http.Request, s *session) ([]nodeRow, error) {
	st, err := d.cluster.Status(r.Context(), authed(s, &pb.StatusRequest{}))
	if err != nil {
		return nil, err
	}
	voters := map[string]bool{}
	if ms, err := d.cluster.Members(r.Context(), authed(s, &pb.MembersRequest{})); err == nil {
		for _, m := range ms.Msg.Members {
			voters[m.Id] = m.Voter
		}
	}
	var commit uint64
	for _, n := range st.Msg.Nodes {
		commit = max(commit, n.CommitIndex)
	}
	var out []nodeRow
	for _, n := range st.Msg.Nodes {
		row := nodeRow{ID: n.Id, RaftAddr: n.RaftAddr, State: n.State, Leader: n.LeaderId, Error: n.Error,
			Voter: voters[n.Id], Term: n.Term, Commit: n.CommitIndex, Applied: n.AppliedIndex, Last: n.LastIndex}
		if n.Error == "" {
			row.Lag = commit - min(commit, n.AppliedIndex) // entries behind the newest commit any node reports
		}
		if n.LastContact != nil {
			row.LastContact = fmtDur(n.LastContact.AsDuration())
		}
		out = append(out, row)
	}
	return out, nil
}
