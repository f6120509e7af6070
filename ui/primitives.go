package ui

import (
	"fmt"
	"net/http"
	"time"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
)

// electionRow is an election and its term: how long the leader has led
// and how its lease's renewals go (the leader is a lease on the
// election's name, so its health is a lease's).
type electionRow struct {
	Name, Value, Owner, TermAge string
	LeaseID, Token              uint64
	Since                       time.Time
	Candidates                  uint32
	Healthy                     bool
	Health                      string
}

type electionsData struct {
	Prefix string
	Rows   []electionRow
}

func (d *Dashboard) elections(r *http.Request, s *session) (electionsData, error) {
	data := electionsData{Prefix: s.prefix(r)}
	res, err := d.elect.List(r.Context(), authed(s, &pb.ElectionsListRequest{Prefix: data.Prefix}))
	if err != nil {
		return data, err
	}
	locks := map[string]*pb.Lock{}
	if lr, err := d.admin.Locks(r.Context(), authed(s, &pb.LocksRequest{Prefix: data.Prefix, PageSize: maxRows})); err == nil {
		for _, l := range lr.Msg.Locks {
			locks[l.Resource] = l
		}
	}
	now := time.Now()
	for _, e := range res.Msg.Elections {
		row := electionRow{Name: e.Name, Value: e.Value, Owner: e.Owner, LeaseID: e.LeaseId, Token: e.Token,
			Candidates: e.Candidates, TermAge: "—", Health: "no leader"}
		if e.Since != nil && e.LeaseId != 0 {
			row.Since = e.Since.AsTime()
			row.TermAge = fmtDur(now.Sub(row.Since))
		}
		if l := locks[e.Name]; e.LeaseId != 0 && l != nil && l.LeaseId == e.LeaseId {
			row.Healthy, row.Health = termHealth(now, l)
		} else if e.LeaseId != 0 {
			row.Health = "not known: more leases under this prefix than the page reads"
		}
		data.Rows = append(data.Rows, row)
	}
	return data, nil
}

// termHealth says how the leader's lease is renewed: overdue (no renewal
// for half its TTL) or ok, with its renewals and time left where this
// node knows them (the leader's timers run on the cluster's leader).
func termHealth(now time.Time, l *pb.Lock) (bool, string) {
	ttl := l.Ttl.AsDuration()
	last := l.AcquiredAt.AsTime()
	if l.RenewedAt != nil {
		last = l.RenewedAt.AsTime()
	}
	since := max(0, now.Sub(last))
	text := fmt.Sprintf("renewed %d times, last %s ago; TTL %s", l.RenewCount, fmtDur(since), fmtDur(ttl))
	if l.RenewCount == 0 {
		text = fmt.Sprintf("not renewed yet, granted %s ago; TTL %s", fmtDur(since), fmtDur(ttl))
	}
	if l.ExpiresIn != nil {
		text += ", expires in " + fmtDur(l.ExpiresIn.AsDuration())
	}
	// Without the leader's countdown, this node's clock judges.
	if l.RenewalOverdue || (l.ExpiresIn == nil && since > ttl/2) {
		return false, "renewal overdue: " + text
	}
	return true, "ok: " + text
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
