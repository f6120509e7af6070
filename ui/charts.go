package ui

import (
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// A series is one chart: what it counts, from which metric family (and
// label), and whether it is a counter (charted as the increase per step)
// or a gauge (charted as sampled).
type series struct {
	Title, Metric, Label, Value string
	Counter                     bool
}

var chartSeries = []series{
	{Title: "Acquisitions", Metric: "leasehold_acquisitions_total", Counter: true},
	{Title: "Acquires waiting", Metric: "leasehold_waiters"},
	{Title: "Expiries", Metric: "leasehold_leases_ended_total", Label: "reason", Value: "expired", Counter: true},
	{Title: "Renewal failures", Metric: "leasehold_renewal_failures_total", Counter: true},
	{Title: "Forced releases", Metric: "leasehold_forced_releases_total", Counter: true},
	{Title: "Fence rejections", Metric: "leasehold_fence_rejections_total", Counter: true},
}

// sample is the series' raw values at one time.
type sample struct {
	at     time.Time
	values []float64
}

// sampler keeps a ring of samples of the node's own metrics, one a step.
type sampler struct {
	reg prometheus.Gatherer
	mu  sync.Mutex
	buf []sample // oldest first, at most size
	n   int
}

func newSampler(reg prometheus.Gatherer, size int) *sampler {
	return &sampler{reg: reg, n: size + 1} // one more: the first step's counters need a start
}

func (s *sampler) read(now time.Time) sample {
	out := sample{at: now, values: make([]float64, len(chartSeries))}
	mfs, err := s.reg.Gather()
	if err != nil {
		return out
	}
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	for i, c := range chartSeries {
		mf := byName[c.Metric]
		if mf == nil {
			continue
		}
		for _, m := range mf.Metric {
			if c.Label != "" && !hasLabel(m, c.Label, c.Value) {
				continue
			}
			out.values[i] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return out
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.Label {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

func (s *sampler) take(now time.Time) {
	smp := s.read(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, smp)
	if len(s.buf) > s.n {
		s.buf = append([]sample(nil), s.buf[len(s.buf)-s.n:]...)
	}
}

// points are each series' chart values: per step for counters, with the
// step in progress (up to now) last.
func (s *sampler) points(now time.Time) [][]float64 {
	s.mu.Lock()
	all := append(append([]sample(nil), s.buf...), s.read(now))
	s.mu.Unlock()
	out := make([][]float64, len(chartSeries))
	for i, c := range chartSeries {
		for j := 1; j < len(all); j++ {
			v := all[j].values[i]
			if c.Counter {
				v = max(0, v-all[j-1].values[i])
			}
			out[i] = append(out[i], v)
		}
	}
	return out
}

// chart is one series drawn as SVG bars, server side: no script.
type chart struct {
	Title string
	Last  string
	Max   string
	SVG   template.HTML
}

const chartW, chartH = 360.0, 80.0

func (s *sampler) charts(now time.Time, step time.Duration, steps int) []chart {
	pts := s.points(now)
	var out []chart
	for i, c := range chartSeries {
		p := pts[i]
		var peak float64
		for _, v := range p {
			peak = max(peak, v)
		}
		top := max(peak, 1) // the scale: an idle chart stays flat
		// One bar a step: the newest at the right edge, older ones one
		// step further left each, over steps steps. Bars, not a line, so
		// a single sample shows.
		var bars strings.Builder
		w := chartW / float64(steps)
		for j, v := range p {
			x := chartW - float64(len(p)-j)*w
			h := v / top * (chartH - 4)
			fmt.Fprintf(&bars, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`, x+0.5, chartH-2-h, max(w-1, 1), h)
		}
		last := 0.0
		if len(p) > 0 {
			last = p[len(p)-1]
		}
		svg := fmt.Sprintf(`<svg class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-label="%s over the last %s">`+
			`<line x1="0" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#ccc"/><g fill="#2563eb">%s</g></svg>`,
			chartW, chartH, template.HTMLEscapeString(c.Title), fmtDur(step*time.Duration(steps)),
			chartH-2, chartW, chartH-2, bars.String())
		out = append(out, chart{Title: c.Title, Last: fmt.Sprint(last), Max: fmt.Sprint(peak), SVG: template.HTML(svg)})
	}
	return out
}

func (d *Dashboard) chartData() any {
	return struct {
		Step   string
		Charts []chart
	}{fmtDur(d.cfg.SampleEvery), d.charts.charts(time.Now(), d.cfg.SampleEvery, d.cfg.Samples)}
}

func (d *Dashboard) chartsPage(w http.ResponseWriter, r *http.Request, s *session) {
	d.render(w, http.StatusOK, "charts", page{session: s, Title: "Charts", Nav: "charts", Data: d.chartData()})
}

func (d *Dashboard) chartsFragment(w http.ResponseWriter, r *http.Request, s *session) {
	d.fragment(w, "charts", "charts", page{session: s, Data: d.chartData()})
}
