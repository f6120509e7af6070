package ui

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
)

type auditRow struct {
	Index, LeaseID, Token                             uint64
	Time                                              time.Time
	Actor, Action, Resource, Owner, Operation, Reason string
}

// auditPages are the page of an audit record's resource, by the kind its
// action names (the action's first word): a forced release names a
// lease's resource, a purge or delete a queue or a group. A kind with no
// page here (KV keys have none) links nowhere rather than to a wrong one.
var auditPages = map[string]struct{ path, param string }{
	"force":       {"/ui/lease", "resource"},
	"queue":       {"/ui/queue", "name"},
	"group":       {"/ui/group", "name"},
	"idempotency": {"/ui/idempotency", "prefix"},
}

// Link is the page of the record's resource ("" if it has none).
func (a auditRow) Link() string {
	kind, _, _ := strings.Cut(a.Action, "-")
	p, ok := auditPages[kind]
	if !ok || a.Resource == "" {
		return ""
	}
	return p.path + "?" + url.Values{p.param: {a.Resource}}.Encode()
}

// auditFilter narrows the audit log; empty fields match everything.
type auditFilter struct {
	Resource, Actor, Action string
	Since                   time.Duration
	SinceText               string
}

// audit reads the newest records first.
func (d *Dashboard) audit(r *http.Request, s *session, f auditFilter) ([]auditRow, error) {
	res, err := d.admin.Audit(r.Context(), authed(s, &pb.AuditRequest{Since: durationpb.New(f.Since), Limit: leasehold.MaxListLimit}))
	if err != nil {
		return nil, err
	}
	var out []auditRow
	for _, a := range res.Msg.Records {
		if (f.Resource != "" && a.Resource != f.Resource) || (f.Actor != "" && a.Actor != f.Actor) || (f.Action != "" && a.Action != f.Action) {
			continue
		}
		out = append(out, auditRow{Index: a.Index, LeaseID: a.LeaseId, Token: a.Token, Time: a.Time.AsTime(),
			Actor: a.Actor, Action: a.Action, Resource: a.Resource, Owner: a.Owner, Operation: a.Operation, Reason: a.Reason})
	}
	slices.Reverse(out)
	return out, nil
}

func (d *Dashboard) auditPage(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	f := auditFilter{Resource: q.Get("resource"), Actor: q.Get("actor"), Action: q.Get("action"), Since: time.Hour, SinceText: q.Get("since")}
	if f.SinceText != "" {
		v, err := time.ParseDuration(f.SinceText)
		if err != nil || v < 0 {
			d.fail(w, r, s, http.StatusBadRequest, "since is "+f.SinceText+"; give a duration such as 30m or 24h.")
			return
		}
		f.Since = v
	} else {
		f.SinceText = "1h"
	}
	rows, err := d.audit(r, s, f)
	if err != nil {
		d.failAPI(w, r, s, err)
		return
	}
	d.render(w, http.StatusOK, "audit", page{session: s, Title: "Audit log", Nav: "audit",
		Data: struct {
			Filter auditFilter
			Rows   []auditRow
		}{f, rows}})
}
