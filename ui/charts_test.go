package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The charts keep one sample a step for the last hour (a ring of 61), plot
// counters as their increase per step with the step in progress last, and
// gauges as sampled.
func TestSamplerKeepsAnHourOfPerStepIncreases(t *testing.T) {
	reg := prometheus.NewRegistry()
	acq := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "leasehold_acquisitions_total"}, []string{"outcome"})
	ended := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "leasehold_leases_ended_total"}, []string{"reason"})
	waiting := prometheus.NewGauge(prometheus.GaugeOpts{Name: "leasehold_waiters"})
	reg.MustRegister(acq, ended, waiting)
	s := newSampler(reg, 60)
	t0 := time.Unix(1_800_000_000, 0)
	for i := range 100 {
		acq.WithLabelValues("granted").Add(float64(i))
		acq.WithLabelValues("already_exists").Add(1)
		ended.WithLabelValues("expired").Add(2)
		ended.WithLabelValues("released").Add(100) // not an expiry
		waiting.Set(float64(i % 7))
		s.take(t0.Add(time.Duration(i) * time.Minute))
	}
	if len(s.buf) != 61 {
		t.Fatalf("the ring holds %d samples, want 61 (an hour of steps and the first one's start)", len(s.buf))
	}
	acq.WithLabelValues("granted").Add(5) // the step in progress
	pts := s.points(t0.Add(100 * time.Minute))
	series := map[string][]float64{}
	for i, c := range chartSeries {
		series[c.Title] = pts[i]
	}
	a := series["Acquisitions"]
	if len(a) != 61 {
		t.Fatalf("%d acquisition points, want 60 steps and the one in progress", len(a))
	}
	// Step i added i granted and 1 refused: the last full step is i=99.
	if a[59] != 99+1 || a[0] != 40+1 || a[60] != 5 {
		t.Fatalf("acquisitions per step: first %v, last full %v, in progress %v; want 41, 100, 5", a[0], a[59], a[60])
	}
	for _, v := range series["Expiries"] {
		if v != 2 && v != 0 {
			t.Fatalf("expiries per step %v: the released leases are counted as expiries", series["Expiries"])
		}
	}
	if w := series["Acquires waiting"]; w[59] != 99%7 {
		t.Fatalf("waiting acquires at the last step: %v, want %d (a gauge is charted as sampled)", w[59], 99%7)
	}
	cs := s.charts(t0.Add(100*time.Minute), time.Minute, 60)
	if len(cs) != len(chartSeries) || strings.Count(string(cs[0].SVG), "<rect") != 61 || cs[0].Last != "5" {
		t.Fatalf("charts: %+v", cs[0])
	}
}
