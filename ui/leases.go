package ui

import (
	"net/http"
	"slices"
	"strings"
	"time"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
)

// leaseRow is one held resource in the live table.
type leaseRow struct {
	Resource, Owner, Operation, Progress string
	LeaseID, Token, RenewCount           uint64
	Age, ExpiresIn, OldestWait, TTL      string
	AcquiredAt, ProgressAt               time.Time
	Overdue, Stale                       bool
	Waiters                              uint32
	Resources                            []string
	Metadata                             map[string]string
}

func rowOf(l *pb.Lock) leaseRow {
	r := leaseRow{Resource: l.Resource, Owner: l.Owner, Operation: l.Operation, Progress: l.Progress,
		LeaseID: l.LeaseId, Token: l.Token, RenewCount: l.RenewCount,
		Age: fmtDur(l.HeldFor.AsDuration()), TTL: fmtDur(l.Ttl.AsDuration()),
		Overdue: l.RenewalOverdue, Stale: l.ProgressStale, Waiters: l.Waiters,
		Resources: l.LeaseResources, Metadata: l.Metadata}
	r.ExpiresIn = "known on the leader only" // its timers run there
	if l.ExpiresIn != nil {
		r.ExpiresIn = fmtDur(l.ExpiresIn.AsDuration())
	}
	if l.OldestWait != nil {
		r.OldestWait = fmtDur(l.OldestWait.AsDuration())
	}
	if l.AcquiredAt != nil {
		r.AcquiredAt = l.AcquiredAt.AsTime()
	}
	if l.ProgressAt != nil {
		r.ProgressAt = l.ProgressAt.AsTime()
	}
	return r
}

type leasesData struct {
	Prefix string
	Rows   []leaseRow
	More   bool
}

// maxRows bounds the live table; the prefix filter narrows it.
const maxRows = 500

func (d *Dashboard) leases(r *http.Request, s *session) (leasesData, error) {
	data := leasesData{Prefix: s.prefix(r)}
	res, err := d.admin.Locks(r.Context(), authed(s, &pb.LocksRequest{Prefix: data.Prefix, PageSize: maxRows}))
	if err != nil {
		return data, err
	}
	for _, l := range res.Msg.Locks {
		data.Rows = append(data.Rows, rowOf(l))
	}
	slices.SortStableFunc(data.Rows, func(a, b leaseRow) int { return strings.Compare(a.Resource, b.Resource) })
	data.More = res.Msg.NextPageToken != ""
	return data, nil
}

// waiterRow is one queued acquire.
type waiterRow struct {
	Resources        []string
	Owner, Operation string
	Wait, Waiting    string
	QueuedAt         time.Time
}

// ResourceView is one resource in full.
type ResourceView struct {
	Resource  string
	Held      bool
	Lease     leaseRow
	LockDelay string
	Waiters   []waiterRow
	Timeline  []timelineEntry
	Forced    *auditRow // the page follows a forced release: its record
	Risk      any
}

func (d *Dashboard) resource(r *http.Request, s *session, name string) (ResourceView, error) {
	data := ResourceView{Resource: name}
	res, err := d.admin.Locks(r.Context(), authed(s, &pb.LocksRequest{Resource: name}))
	if err != nil {
		return data, err
	}
	if len(res.Msg.Locks) == 1 {
		l := res.Msg.Locks[0]
		data.Held = l.LeaseId != 0
		data.Lease = rowOf(l)
		if l.LockDelay != nil && l.LockDelay.AsDuration() > 0 {
			data.LockDelay = fmtDur(l.LockDelay.AsDuration())
		}
		for _, w := range l.WaiterList {
			data.Waiters = append(data.Waiters, waiterRow{Resources: w.Resources, Owner: w.Owner, Operation: w.Operation,
				Wait: fmtDur(w.Wait.AsDuration()), Waiting: fmtDur(w.Waiting.AsDuration()), QueuedAt: w.QueuedAt.AsTime()})
		}
	}
	return data, nil
}

func (d *Dashboard) leasePage(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.URL.Query().Get("resource")
	if name == "" {
		d.fail(w, r, s, http.StatusBadRequest, "Name a resource: /ui/lease?resource=NAME.")
		return
	}
	data, err := d.resource(r, s, name)
	if err != nil {
		d.failAPI(w, r, s, err)
		return
	}
	audit, err := d.audit(r, s, auditFilter{Resource: name, Since: 24 * time.Hour})
	if err != nil {
		d.failAPI(w, r, s, err)
		return
	}
	if r.URL.Query().Get("forced") != "" {
		for i, a := range audit { // newest first
			if a.Action == "force-release" {
				data.Forced = &audit[i]
				break
			}
		}
	}
	data.Timeline = timeline(d.history(r, s, name), audit)
	d.render(w, http.StatusOK, "lease", page{session: s, Title: name, Nav: "leases", Data: data, Live: liveURL("lease", r.URL.Query())})
}
