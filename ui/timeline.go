package ui

import (
	"errors"

	"cmp"
	"connectrpc.com/connect"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// A resource's timeline: what happened to it, newest first, from the
// node's watch history (grants, renewals, releases, expiries, forced
// releases, waits) joined with the audit log (who forced a release, why,
// and when; and the records older than the history). The watch carries
// no times, so an entry is placed by its log index; an audited one also
// has the leader's wall clock.

// timelineEntry is one happening, or a run of renewals of one lease.
type timelineEntry struct {
	Index, LastIndex uint64 // LastIndex: the last renewal of a run
	Kind             string // a watch event's kind (force_released for an audited forced release)
	LeaseID, Token   uint64
	Owner, Operation string
	Reason           string
	Renewals         int // in a run of renewals
	// From the audit record of the same log entry.
	Actor, Note string
	Time        time.Time
}

// kindNames are the watch's kinds as a person reads them.
var kindNames = map[string]string{"force_released": "forced release", "queued": "waiting", "withdrawn": "stopped waiting",
	"leader_changed": "leader changed", "put": "key written", "deleted": "key deleted"}

// What says what happened.
func (t timelineEntry) What() string {
	if t.Renewals > 1 {
		return fmt.Sprintf("renewed ×%d", t.Renewals)
	}
	if n, ok := kindNames[t.Kind]; ok {
		return n
	}
	return strings.ReplaceAll(t.Kind, "-", " ")
}

// timeline merges events (oldest first) and audit records into at most
// historyShown entries, newest first.
func timeline(events []eventRow, audit []auditRow) []timelineEntry {
	byIndex := map[uint64]auditRow{}
	for _, a := range audit {
		byIndex[a.Index] = a
	}
	var out []timelineEntry
	seen := map[uint64]bool{}
	for _, e := range events {
		seen[e.Index] = true
		if last := len(out) - 1; e.Kind == "renewed" && last >= 0 && out[last].Kind == "renewed" && out[last].LeaseID == e.LeaseID {
			out[last].LastIndex, out[last].Renewals = e.Index, out[last].Renewals+1
			continue
		}
		t := timelineEntry{Index: e.Index, LastIndex: e.Index, Kind: e.Kind, LeaseID: e.LeaseID, Token: e.Token,
			Owner: e.Owner, Operation: e.Operation, Reason: e.Reason}
		if e.Kind == "renewed" {
			t.Renewals = 1
		}
		if a, ok := byIndex[e.Index]; ok {
			t.Actor, t.Note, t.Time = a.Actor, a.Reason, a.Time
		}
		out = append(out, t)
	}
	for _, a := range audit {
		if !seen[a.Index] { // older than the watch history
			out = append(out, timelineEntry{Index: a.Index, LastIndex: a.Index, Kind: auditKind(a.Action), LeaseID: a.LeaseID,
				Token: a.Token, Owner: a.Owner, Operation: a.Operation, Actor: a.Actor, Note: a.Reason, Time: a.Time})
		}
	}
	slices.SortFunc(out, func(a, b timelineEntry) int { return cmp.Compare(b.Index, a.Index) })
	return out[:min(len(out), historyShown)]
}

// auditKind names an audit action as the watch names its event.
func auditKind(action string) string {
	if action == "force-release" {
		return "force_released"
	}
	return action
}

// resourceTimeline reads a resource's timeline, for a viewer the API shows
// the resource to.
func (d *Dashboard) resourceTimeline(r *http.Request, s *session, name string) ([]timelineEntry, error) {
	if name == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("name a resource: /ui/lease/timeline?resource=NAME"))
	}
	if _, err := d.resource(r, s, name); err != nil {
		return nil, err
	}
	audit, err := d.audit(r, s, auditFilter{Resource: name, Since: 24 * time.Hour})
	if err != nil {
		return nil, err
	}
	return timeline(d.history(r, s, name), audit), nil
}

func (d *Dashboard) timelineLive(r *http.Request, s *session) (map[string]string, error) {
	tl, err := d.resourceTimeline(r, s, r.URL.Query().Get("resource"))
	if err != nil {
		return nil, err
	}
	return d.part("lease", "timeline", s, ResourceView{Timeline: tl})
}

// timelinePart is the timeline alone, which the page polls when its event
// stream fails.
func (d *Dashboard) timelinePart(w http.ResponseWriter, r *http.Request, s *session) {
	tl, err := d.resourceTimeline(r, s, r.URL.Query().Get("resource"))
	if err != nil {
		d.failAPI(w, r, s, err)
		return
	}
	d.fragment(w, "lease", "timeline", page{session: s, Data: ResourceView{Timeline: tl}})
}
