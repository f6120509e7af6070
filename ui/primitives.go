package ui

import (
	"net/http"
	"time"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
)

type electionRow struct {
	Name, Value, Owner, ExpiresIn string
	LeaseID, Token                uint64
	Since                         time.Time
	Candidates                    uint32
}

func (d *Dashboard) electionsPage(w http.ResponseWriter, r *http.Request, s *session) {
	prefix := s.prefix(r)
	res, err := d.elect.List(r.Context(), authed(s, &pb.ElectionsListRequest{Prefix: prefix}))
	if err != nil {
		d.failAPI(w, r, s, err)
		return
	}
	var rows []electionRow
	for _, e := range res.Msg.Elections {
		row := electionRow{Name: e.Name, Value: e.Value, Owner: e.Owner, LeaseID: e.LeaseId, Token: e.Token,
			Candidates: e.Candidates, ExpiresIn: "—"}
		if e.Since != nil {
			row.Since = e.Since.AsTime()
		}
		if e.ExpiresIn != nil {
			row.ExpiresIn = fmtDur(e.ExpiresIn.AsDuration())
		}
		rows = append(rows, row)
	}
	d.render(w, http.StatusOK, "elections", page{session: s, Title: "Elections", Nav: "elections",
		Data: struct {
			Prefix string
			Rows   []electionRow
		}{prefix, rows}})
}

// idemRow is one idempotency key. Its stored result is never shown: it is
// the application's data (a payment's answer), not the operator's.
type idemRow struct {
	Key, Owner, Retention string
	Token, ResultSize     uint64
	StartedAt, Completed  time.Time
	Done                  bool
}

// maxIdemRows bounds the idempotency view; the prefix filter narrows it.
const maxIdemRows = 500

func (d *Dashboard) idemPage(w http.ResponseWriter, r *http.Request, s *session) {
	prefix := s.prefix(r)
	res, err := d.idem.List(r.Context(), authed(s, &pb.IdempotencyListRequest{Prefix: prefix, Limit: maxIdemRows}))
	if err != nil {
		d.failAPI(w, r, s, err)
		return
	}
	var rows []idemRow
	for _, k := range res.Msg.Records {
		row := idemRow{Key: k.Key, Owner: k.Owner, Token: k.Token, ResultSize: k.ResultSize,
			Retention: fmtDur(k.Retention.AsDuration()), Done: k.CompletedAt != nil}
		if k.StartedAt != nil {
			row.StartedAt = k.StartedAt.AsTime()
		}
		if k.CompletedAt != nil {
			row.Completed = k.CompletedAt.AsTime()
		}
		rows = append(rows, row)
	}
	d.render(w, http.StatusOK, "idempotency", page{session: s, Title: "Idempotency keys", Nav: "idempotency",
		Data: struct {
			Prefix string
			Rows   []idemRow
		}{prefix, rows}})
}
