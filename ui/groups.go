package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
)

// groupRow is one partition group in the list.
type groupRow struct {
	Name                                  string
	Partitions, Members, Pending, Unowned uint32
	Rebalances                            uint64
	RevokeTimeout                         string
}

func groupRowOf(g *pb.Group) groupRow {
	return groupRow{Name: g.Name, Partitions: g.Partitions, Members: g.Members, Pending: g.PendingRevocations,
		Unowned: g.Unowned, Rebalances: g.Rebalances, RevokeTimeout: fmtDur(g.RevokeTimeout.AsDuration())}
}

func (d *Dashboard) groupsPage(w http.ResponseWriter, r *http.Request, s *session) {
	prefix := s.prefix(r)
	res, err := d.groups.List(r.Context(), authed(s, &pb.GroupsListRequest{Prefix: prefix}))
	if err != nil {
		d.failAPI(w, r, s, err)
		return
	}
	var rows []groupRow
	for _, g := range res.Msg.Groups {
		rows = append(rows, groupRowOf(g))
	}
	d.render(w, http.StatusOK, "groups", page{session: s, Title: "Partition groups", Nav: "groups",
		Data: struct {
			Prefix string
			Rows   []groupRow
		}{prefix, rows}})
}

// memberRow is a group member and the partitions it owns. Session is
// its session lease's resource, whose page can force a stuck member out.
type memberRow struct {
	Member, Partitions, Revoking, ExpiresIn, Session string
	LeaseID                                          uint64
	Since                                            time.Time
}

// partitionRow is one partition: its owner and epoch, and the owner it
// moves to while it is being revoked.
type partitionRow struct {
	Partition        uint32
	Owner, NextOwner string
	Epoch, LeaseID   uint64
	Since, Revoking  time.Time
	IsRevoking       bool
}

func (d *Dashboard) groupPage(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.URL.Query().Get("name")
	if name == "" {
		d.fail(w, r, s, http.StatusBadRequest, "Name a group: /ui/group?name=NAME.")
		return
	}
	res, err := d.groups.Get(r.Context(), authed(s, &pb.GroupsGetRequest{Group: name}))
	if err != nil {
		d.failAPI(w, r, s, err)
		return
	}
	var members []memberRow
	for _, m := range res.Msg.Members {
		row := memberRow{Member: m.Member, LeaseID: m.LeaseId, Partitions: joinNums(m.Partitions), Revoking: joinNums(m.Revoking), ExpiresIn: "—",
			Session: leasehold.GroupSessionResource(name, m.Member)}
		if m.Since != nil {
			row.Since = m.Since.AsTime()
		}
		if m.ExpiresIn != nil {
			row.ExpiresIn = fmtDur(m.ExpiresIn.AsDuration())
		}
		members = append(members, row)
	}
	var parts []partitionRow
	for _, p := range res.Msg.Partitions {
		row := partitionRow{Partition: p.Partition, Owner: p.Owner, NextOwner: p.NextOwner, Epoch: p.Epoch, LeaseID: p.LeaseId, IsRevoking: p.Revoking}
		if p.Since != nil {
			row.Since = p.Since.AsTime()
		}
		if p.RevokingSince != nil {
			row.Revoking = p.RevokingSince.AsTime()
		}
		parts = append(parts, row)
	}
	charts := chartsJSONText(d.charts.charts(time.Now(), d.cfg.SampleEvery, track{"group", name}))
	d.render(w, http.StatusOK, "group", page{session: s, Title: "Group " + name, Nav: "groups",
		Live: liveURL("group", url.Values{"group": {name}}),
		Data: struct {
			Group      groupRow
			Members    []memberRow
			Partitions []partitionRow
			Charts     string
		}{groupRowOf(res.Msg.Group), members, parts, charts}})
}

func joinNums(ns []uint32) string {
	out := ""
	for i, n := range ns {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprint(n)
	}
	return out
}
