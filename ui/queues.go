package ui

import (
	"net/http"
	"net/url"
	"time"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
)

// queueRow is one keyed queue in the list.
type queueRow struct {
	Name                               string
	Depth, InFlight, Dead, Keys, Bytes uint64
	OldestAge, Visibility, Retention   string
	MaxReceives                        uint32
}

func queueRowOf(q *pb.QueueInfo) queueRow {
	r := queueRow{Name: q.Name, Depth: q.Depth, InFlight: q.InFlight, Dead: q.Dead, Keys: q.Keys, Bytes: q.Bytes, OldestAge: "—"}
	if q.OldestAge != nil {
		r.OldestAge = fmtDur(q.OldestAge.AsDuration())
	}
	if s := q.Settings; s != nil {
		r.Visibility, r.Retention, r.MaxReceives = fmtDur(s.Visibility.AsDuration()), fmtDur(s.Retention.AsDuration()), s.MaxReceives
	}
	return r
}

// maxQueueRows bounds the queue list and a queue's deliveries and dead
// letters shown.
const maxQueueRows = 500

func (d *Dashboard) queuesPage(w http.ResponseWriter, r *http.Request, s *session) {
	prefix := s.prefix(r)
	res, err := d.queues.List(r.Context(), authed(s, &pb.QueuesListRequest{Prefix: prefix, Limit: maxQueueRows}))
	if err != nil {
		d.failAPI(w, r, s, err)
		return
	}
	var rows []queueRow
	for _, q := range res.Msg.Queues {
		rows = append(rows, queueRowOf(q))
	}
	d.render(w, http.StatusOK, "queues", page{session: s, Title: "Queues", Nav: "queues",
		Data: struct {
			Prefix string
			Rows   []queueRow
		}{prefix, rows}})
}

// deliveryRow is a message in flight; its body is the application's and
// is never shown.
type deliveryRow struct {
	Key, Consumer, Age, Visibility string
	Sequence, Token                uint64
	Receives                       uint32
	SentAt                         time.Time
}

// deadRow is a dead letter, without its body.
type deadRow struct {
	Key, Note      string
	Sequence       uint64
	Receives       uint32
	SentAt, DiedAt time.Time
}

// queuePage is one queue: its counts and settings, the deliveries in
// flight with the slowest keys first, and its dead letters.
func (d *Dashboard) queuePage(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.URL.Query().Get("name")
	if name == "" {
		d.fail(w, r, s, http.StatusBadRequest, "Name a queue: /ui/queue?name=NAME.")
		return
	}
	res, err := d.queues.Get(r.Context(), authed(s, &pb.QueuesGetRequest{Queue: name, InFlightLimit: maxQueueRows}))
	if err != nil {
		d.failAPI(w, r, s, err)
		return
	}
	dead, err := d.queues.DeadLetters(r.Context(), authed(s, &pb.QueuesDeadLettersRequest{Queue: name, Limit: maxQueueRows}))
	if err != nil {
		d.failAPI(w, r, s, err)
		return
	}
	now := time.Now()
	var flying []deliveryRow
	for _, f := range res.Msg.InFlight {
		row := deliveryRow{Key: f.Key, Consumer: f.Consumer, Sequence: f.Sequence, Token: f.Token, Receives: f.Receives,
			Visibility: fmtDur(f.Visibility.AsDuration())}
		if f.SentAt != nil {
			row.SentAt = f.SentAt.AsTime()
			row.Age = fmtDur(now.Sub(row.SentAt))
		}
		flying = append(flying, row)
	}
	var deads []deadRow
	for _, x := range dead.Msg.DeadLetters {
		row := deadRow{Key: x.Key, Note: x.Note, Sequence: x.Sequence, Receives: x.Receives}
		if x.SentAt != nil {
			row.SentAt = x.SentAt.AsTime()
		}
		if x.DiedAt != nil {
			row.DiedAt = x.DiedAt.AsTime()
		}
		deads = append(deads, row)
	}
	charts := chartsJSONText(d.charts.charts(now, d.cfg.SampleEvery, track{"queue", name}))
	d.render(w, http.StatusOK, "queue", page{session: s, Title: "Queue " + name, Nav: "queues",
		Live: liveURL("queue", url.Values{"queue": {name}}),
		Data: struct {
			Queue    queueRow
			InFlight []deliveryRow
			Dead     []deadRow
			Charts   string
		}{queueRowOf(res.Msg.Queue), flying, deads, charts}})
}
