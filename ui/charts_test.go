package ui

import (
	"encoding/json"
	"maps"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The charts keep one sample a step for the last hour (a ring of 361 at
// 10 s), plot counters as their increase per step with the step in
// progress last, and gauges as sampled.
func TestSamplerKeepsAnHourOfPerStepIncreases(t *testing.T) {
	reg := prometheus.NewRegistry()
	acq := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "leasehold_acquisitions_total"}, []string{"outcome"})
	ended := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "leasehold_leases_ended_total"}, []string{"reason"})
	waiting := prometheus.NewGauge(prometheus.GaugeOpts{Name: "leasehold_waiters"})
	reg.MustRegister(acq, ended, waiting)
	const steps, step = 360, 10 * time.Second
	s := newSampler(reg, nil, steps)
	t0 := time.Unix(1_800_000_000, 0)
	for i := range 400 {
		acq.WithLabelValues("granted").Add(float64(i))
		acq.WithLabelValues("already_exists").Add(1)
		ended.WithLabelValues("expired").Add(2)
		ended.WithLabelValues("released").Add(100) // not an expiry
		waiting.Set(float64(i % 7))
		s.take(t0.Add(time.Duration(i) * step))
	}
	if len(s.at) != steps+1 || len(s.node[0]) != steps+1 {
		t.Fatalf("the ring holds %d samples, want %d (an hour of steps and the first one's start)", len(s.at), steps+1)
	}
	if c := cap(s.node[0]); c > 4*(steps+1) {
		t.Fatalf("a column's array holds %d floats for %d samples: the ring does not stay bounded", c, steps+1)
	}
	acq.WithLabelValues("granted").Add(5) // the step in progress
	now := t0.Add(400 * step)
	cs := s.charts(now, step, track{})
	if cs.Span != 3600 || cs.Step != 10 {
		t.Fatalf("the charts span %vs at %vs a step, want 3600 at 10", cs.Span, cs.Step)
	}
	byTitle := map[string]chartJSON{}
	for _, c := range cs.Charts {
		byTitle[c.Title] = c
	}
	a := byTitle["Acquisitions"]
	if len(a.Vals) != steps+1 || len(a.Times) != steps+1 {
		t.Fatalf("%d acquisition points at %d times, want %d steps and the one in progress", len(a.Vals), len(a.Times), steps)
	}
	if a.Times[steps] != now.Unix() || a.Times[0] != t0.Add(40*step).Unix() {
		t.Fatalf("times run %d..%d, want %d..%d", a.Times[0], a.Times[steps], t0.Add(40*step).Unix(), now.Unix())
	}
	// Step i added i granted and 1 refused: the last full step is i=399.
	if a.Vals[steps-1] != 399+1 || a.Vals[0] != 40+1 || a.Vals[steps] != 5 || a.Last != 5 || a.Max != 400 {
		t.Fatalf("acquisitions per step: first %v, last full %v, in progress %v (last %v, max %v); want 41, 400, 5, 5, 400",
			a.Vals[0], a.Vals[steps-1], a.Vals[steps], a.Last, a.Max)
	}
	for _, v := range byTitle["Expiries"].Vals {
		if v != 2 && v != 0 {
			t.Fatalf("expiries per step %v: the released leases are counted as expiries", byTitle["Expiries"].Vals)
		}
	}
	if w := byTitle["Acquires waiting"]; w.Vals[steps-1] != 399%7 || w.Unit != "waiting" {
		t.Fatalf("waiting acquires at the last step: %v %s, want %d (a gauge is charted as sampled)", w.Vals[steps-1], w.Unit, 399%7)
	}
	if u := a.Unit; u != "per 10s" {
		t.Fatalf("a counter's unit is %q, want per 10s", u)
	}
}

// Each queue's depth and oldest message, and each group's rebalances, are
// charted on their own: a resource's columns start when it appears (gaps
// before, null in JSON), go when it has been gone for the whole ring, and
// no more than maxCharted of a kind are kept.
func TestSamplerChartsEachQueueAndGroup(t *testing.T) {
	reg := prometheus.NewRegistry()
	depth := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "leasehold_queue_depth"}, []string{"queue"})
	oldest := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "leasehold_queue_oldest_age_seconds"}, []string{"queue"})
	reg.MustRegister(depth, oldest)
	rebalances := map[string]uint64{}
	s := newSampler(reg, func(int) map[string]uint64 { return maps.Clone(rebalances) }, 6) // past the limit too
	t0 := time.Unix(1_800_000_000, 0)
	s.take(t0)
	depth.WithLabelValues("orders").Set(7)
	oldest.WithLabelValues("orders").Set(42)
	rebalances["shards"] = 3
	s.take(t0.Add(time.Second))
	rebalances["shards"] = 5
	depth.WithLabelValues("orders").Set(9)
	s.take(t0.Add(2 * time.Second))

	q := s.charts(t0.Add(3*time.Second), time.Second, track{"queue", "orders"})
	if len(q.Charts) != 2 || q.Charts[0].Title != "Depth" || q.Charts[1].Title != "Oldest message age" {
		t.Fatalf("a queue's charts: %+v", q.Charts)
	}
	if d := q.Charts[0].Vals; d[0] != 7 || d[1] != 9 || d[2] != 9 || q.Charts[1].Vals[1] != 42 {
		t.Fatalf("the queue's depth by step %v (want 7, 9, and 9 now), oldest %v", d, q.Charts[1].Vals)
	}
	// The group's first step has no start: a gap.
	gs := s.charts(t0.Add(3*time.Second), time.Second, track{"group", "shards"})
	if g := gs.Charts[0]; g.Title != "Rebalances" || !math.IsNaN(float64(g.Vals[0])) || g.Vals[1] != 2 || g.Vals[2] != 0 {
		t.Fatalf("the group's rebalances per step: %v, want [gap 2 0]", g.Vals)
	}
	if b, _ := json.Marshal(gs); !strings.Contains(string(b), `"values":[null,2,0]`) {
		t.Fatalf("a gap is not null in JSON: %s", b)
	}

	// Gone for a whole ring, a resource's columns go.
	depth.Reset()
	oldest.Reset()
	delete(rebalances, "shards")
	for i := range 8 {
		s.take(t0.Add(time.Duration(3+i) * time.Second))
	}
	if len(s.res) != 0 {
		t.Fatalf("the sampler keeps %d resources gone for the whole ring", len(s.res))
	}
	// No more than maxCharted of a kind.
	for i := range maxCharted + 20 {
		rebalances[strings.Repeat("g", 1)+string(rune('a'+i%26))+strings.Repeat("x", i/26)] = 1
		depth.WithLabelValues("q" + strings.Repeat("x", i)).Set(1)
	}
	s.take(t0.Add(20 * time.Second))
	counts := map[string]int{}
	for tr := range s.res {
		counts[tr.kind]++
	}
	if counts["queue"] != maxCharted || counts["group"] != maxCharted {
		t.Fatalf("the sampler keeps %v resources, want at most %d of each kind", counts, maxCharted)
	}
}
