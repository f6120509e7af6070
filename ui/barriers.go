package ui

import (
	"fmt"
	"net/http"
	"time"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
)

// barrierRow is one barrier or latch: its phase, how many arrived, and
// how its last phase ended (a broken one is flagged).
type barrierRow struct {
	Name, Kind, Arrived, Timeout, LastEnd string
	Phase, Trips, Broken, LastToken       uint64
	LastBroken                            bool
	StartedAt                             time.Time
}

func barrierRowOf(b *pb.Barrier) barrierRow {
	row := barrierRow{Name: b.Name, Kind: leasehold.BarrierKind(b.Kind).String(), Phase: b.Phase, Trips: b.Trips, Broken: b.Broken,
		Arrived: fmt.Sprintf("%d of %d", b.Arrived, b.Parties), Timeout: "none", LastEnd: "—"}
	if b.Tripped {
		row.Arrived = "tripped"
	}
	if b.Timeout != nil {
		row.Timeout = fmtDur(b.Timeout.AsDuration())
	}
	if b.StartedAt != nil {
		row.StartedAt = b.StartedAt.AsTime()
	}
	if n := len(b.Ends); n > 0 {
		e := b.Ends[n-1]
		o := leasehold.BarrierOutcome(e.Outcome)
		row.LastEnd = fmt.Sprintf("phase %d %s", e.Phase, o)
		row.LastToken, row.LastBroken = e.Token, o != leasehold.BarrierTripped
	}
	return row
}

func (d *Dashboard) barriersPage(w http.ResponseWriter, r *http.Request, s *session) {
	prefix := s.prefix(r)
	res, err := d.barriers.List(r.Context(), authed(s, &pb.BarriersListRequest{Prefix: prefix, Limit: leasehold.MaxListLimit}))
	if err != nil {
		d.failAPI(w, r, s, err)
		return
	}
	var rows []barrierRow
	for _, b := range res.Msg.Barriers {
		rows = append(rows, barrierRowOf(b))
	}
	d.render(w, http.StatusOK, "barriers", page{session: s, Title: "Barriers and latches", Nav: "barriers",
		Data: struct {
			Prefix string
			Rows   []barrierRow
		}{prefix, rows}})
}
