package ui

import (
	"errors"
	"maps"

	"connectrpc.com/connect"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
)

// The charts: a ring of samples of this node's own metrics, one a step
// (Config.SampleEvery, 10 s) for the last Config.Samples steps (an hour),
// drawn in the browser by uPlot (static/vendor/uplot, see static/dash.js)
// from the JSON of /ui/charts/data, and pushed again at each sample.

// A series is one chart: what it counts, from which metric family (and
// label), and whether it is a counter (charted as the increase per step)
// or a gauge (charted as sampled).
type series struct {
	Title, Unit, Metric, Label, Value string
	Counter                           bool
}

var chartSeries = []series{
	{Title: "Acquisitions", Metric: "leasehold_acquisitions_total", Counter: true},
	{Title: "Acquires waiting", Unit: "waiting", Metric: "leasehold_waiters"},
	{Title: "Expiries", Metric: "leasehold_leases_ended_total", Label: "reason", Value: "expired", Counter: true},
	{Title: "Renewal failures", Metric: "leasehold_renewal_failures_total", Counter: true},
	{Title: "Forced releases", Metric: "leasehold_forced_releases_total", Counter: true},
	{Title: "Fence rejections", Metric: "leasehold_fence_rejections_total", Counter: true},
}

// A resource's own charts: each queue's depth and oldest message (the
// node's queue gauges, labelled by queue) and each group's rebalances
// (Config.GroupRebalances).
var (
	queueSeries = []series{
		{Title: "Depth", Unit: "messages", Metric: "leasehold_queue_depth"},
		{Title: "Oldest message age", Unit: "seconds", Metric: "leasehold_queue_oldest_age_seconds"},
	}
	groupSeries = []series{{Title: "Rebalances", Counter: true}}
)

// maxCharted bounds the queues, and the groups, the sampler keeps (the
// first by name): each costs a float a series a step, 2.9 kB an hour.
const maxCharted = 100

// track names one resource's charts.
type track struct{ kind, name string } // kind: "queue" or "group"

func (t track) series() []series {
	if t.kind == "queue" {
		return queueSeries
	}
	return groupSeries
}

// reading is every series' raw value at one time.
type reading struct {
	node []float64
	res  map[track][]float64
}

// sampler keeps a ring of readings, one a step, as columns aligned with
// the times: the node's series, and each resource's while it exists (NaN
// for a step it did not). It is safe for concurrent use.
type sampler struct {
	reg    prometheus.Gatherer
	groups func(limit int) map[string]uint64
	n      int // readings kept: the steps, and the first one's start

	mu    sync.Mutex
	at    []time.Time
	node  [][]float64
	res   map[track][][]float64
	taken chan struct{} // closed and replaced by each take
}

func newSampler(reg prometheus.Gatherer, groups func(int) map[string]uint64, steps int) *sampler {
	return &sampler{reg: reg, groups: groups, n: steps + 1, node: make([][]float64, len(chartSeries)),
		res: map[track][][]float64{}, taken: make(chan struct{})}
}

func (s *sampler) read() reading {
	out := reading{node: make([]float64, len(chartSeries)), res: map[track][]float64{}}
	if s.groups != nil {
		counts := s.groups(maxCharted)
		names := slices.Sorted(maps.Keys(counts))
		for _, name := range names[:min(len(names), maxCharted)] { // the bound holds whatever the source returns
			out.res[track{"group", name}] = []float64{float64(counts[name])}
		}
	}
	mfs, err := s.reg.Gather()
	if err != nil {
		return out
	}
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	for i, c := range chartSeries {
		for _, m := range byName[c.Metric].GetMetric() {
			if c.Label == "" || labelOf(m, c.Label) == c.Value {
				out.node[i] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	var queues []string
	for _, m := range byName[queueSeries[0].Metric].GetMetric() {
		queues = append(queues, labelOf(m, "queue"))
	}
	slices.Sort(queues)
	for _, q := range queues[:min(len(queues), maxCharted)] {
		out.res[track{"queue", q}] = make([]float64, len(queueSeries))
	}
	for i, c := range queueSeries {
		for _, m := range byName[c.Metric].GetMetric() {
			if v, ok := out.res[track{"queue", labelOf(m, "queue")}]; ok {
				v[i] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func (s *sampler) take(now time.Time) {
	r := s.read()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at = append(s.at, now)
	for i := range s.node {
		s.node[i] = append(s.node[i], r.node[i])
	}
	for t, cols := range s.res {
		v, ok := r.res[t]
		for i := range cols {
			cols[i] = append(cols[i], nan(v, i, ok))
		}
	}
	for t, v := range r.res {
		if _, ok := s.res[t]; !ok {
			cols := make([][]float64, len(v))
			for i := range cols {
				cols[i] = append(slices.Repeat([]float64{math.NaN()}, len(s.at)-1), v[i])
			}
			s.res[t] = cols
		}
	}
	if drop := len(s.at) - s.n; drop > 0 { // append reallocates: the ring stays near n
		s.at = s.at[drop:]
		for i := range s.node {
			s.node[i] = s.node[i][drop:]
		}
		for t, cols := range s.res {
			for i := range cols {
				cols[i] = cols[i][drop:]
			}
			if !slices.ContainsFunc(cols[0], func(v float64) bool { return !math.IsNaN(v) }) {
				delete(s.res, t) // gone for the whole ring
			}
		}
	}
	close(s.taken)
	s.taken = make(chan struct{})
}

func nan(v []float64, i int, ok bool) float64 {
	if !ok {
		return math.NaN()
	}
	return v[i]
}

// changed is closed at the next sample.
func (s *sampler) changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.taken
}

// point is a chart value; NaN (no sample) is null to uPlot, a gap.
type point float64

func (p point) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(p)) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, float64(p), 'g', -1, 64), nil
}

// chartJSON is one chart as static/dash.js hands it to uPlot: the end of
// each step in Unix seconds, and the value of each (per step for a
// counter), the step in progress (up to now) last.
type chartJSON struct {
	Title string  `json:"title"`
	Unit  string  `json:"unit"`
	Last  point   `json:"last"`
	Max   point   `json:"max"`
	Times []int64 `json:"times"`
	Vals  []point `json:"values"`
}

type chartsJSON struct {
	Step   float64     `json:"step"` // seconds
	Span   float64     `json:"span"` // seconds the charts cover: the ring's steps
	Charts []chartJSON `json:"charts"`
}

// charts are the node's charts (t zero) or resource t's, up to now.
func (s *sampler) charts(now time.Time, step time.Duration, t track) chartsJSON {
	cur := s.read()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := chartsJSON{Step: step.Seconds(), Span: step.Seconds() * float64(s.n-1)}
	times := make([]int64, 0, len(s.at))
	for _, at := range s.at[min(1, len(s.at)):] {
		times = append(times, at.Unix())
	}
	times = append(times, now.Unix())
	list, cols, now1 := chartSeries, s.node, cur.node
	if t != (track{}) {
		list, cols = t.series(), s.res[t]
		v, ok := cur.res[t]
		now1 = make([]float64, len(list))
		for i := range now1 {
			now1[i] = nan(v, i, ok)
		}
	}
	for i, c := range list {
		var raw []float64
		if cols != nil {
			raw = cols[i]
		}
		if len(raw) == 0 { // a resource not sampled yet: its value now alone
			raw = []float64{math.NaN()}
		}
		raw = append(slices.Clone(raw), now1[i])
		ch := chartJSON{Title: c.Title, Unit: c.Unit, Times: times}
		if ch.Unit == "" {
			ch.Unit = "per " + fmtDur(step)
		}
		for j := 1; j < len(raw); j++ {
			v := raw[j]
			if c.Counter {
				v = max(0, v-raw[j-1]) // NaN stays NaN
			}
			ch.Vals = append(ch.Vals, point(v))
			if !math.IsNaN(v) {
				ch.Max = max(ch.Max, point(v))
			}
		}
		ch.Last = ch.Vals[len(ch.Vals)-1]
		out.Charts = append(out.Charts, ch)
	}
	return out
}

// chartTrack is the resource whose charts a request asks for (?queue=NAME
// or ?group=NAME), or none: the node's.
func chartTrack(r *http.Request) track {
	q := r.URL.Query()
	switch {
	case q.Get("queue") != "":
		return track{"queue", q.Get("queue")}
	case q.Get("group") != "":
		return track{"group", q.Get("group")}
	}
	return track{}
}

// chartsFor reads the charts a request asks for. A resource's are shown
// only to a viewer the API shows that resource to; the node's are served
// through nodeWide.
func (d *Dashboard) chartsFor(r *http.Request, s *session) (chartsJSON, error) {
	var err error
	switch t := chartTrack(r); t.kind {
	case "":
		if s.limited() { // nodeWide refused it already: never the whole node's figures
			err = connect.NewError(connect.CodePermissionDenied, errors.New(nodeWideText(s)))
		}
	case "queue":
		_, err = d.queues.Get(r.Context(), authed(s, &pb.QueuesGetRequest{Queue: t.name, InFlightLimit: 1}))
	case "group":
		_, err = d.groups.Get(r.Context(), authed(s, &pb.GroupsGetRequest{Group: t.name}))
	}
	if err != nil {
		return chartsJSON{}, err
	}
	return d.charts.charts(time.Now(), d.cfg.SampleEvery, chartTrack(r)), nil
}

// chartsJSONText is the charts as JSON text, for a data attribute or a
// pushed event.
func chartsJSONText(c chartsJSON) string {
	b, _ := json.Marshal(c) // floats and strings only
	return string(b)
}

func (d *Dashboard) chartsPage(w http.ResponseWriter, r *http.Request, s *session) {
	c, err := d.chartsFor(r, s)
	if err != nil {
		d.failAPI(w, r, s, err)
		return
	}
	d.render(w, http.StatusOK, "charts", page{session: s, Title: "Charts", Nav: "charts", Live: liveURL("charts", nil),
		Data: struct{ Step, Span, JSON string }{fmtDur(d.cfg.SampleEvery), fmtDur(d.cfg.SampleEvery * time.Duration(d.cfg.Samples)), chartsJSONText(c)}})
}

// chartsData is the charts' JSON, which a page polls when its event
// stream fails.
func (d *Dashboard) chartsData(w http.ResponseWriter, r *http.Request, s *session) {
	if chartTrack(r) == (track{}) {
		d.nodeWide(d.writeCharts)(w, r, s)
		return
	}
	d.writeCharts(w, r, s)
}

func (d *Dashboard) writeCharts(w http.ResponseWriter, r *http.Request, s *session) {
	c, err := d.chartsFor(r, s)
	if err != nil {
		status, msg := apiError(err)
		http.Error(w, msg, status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write([]byte(chartsJSONText(c)))
}
