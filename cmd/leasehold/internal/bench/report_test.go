package bench

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type fakeWorkload struct {
	names []string
	u     string
}

func (f fakeWorkload) opNames() []string          { return f.names }
func (f fakeWorkload) unit() string               { return f.u }
func (f fakeWorkload) worker(int, *stats)         {}
func (f fakeWorkload) setupDone() <-chan struct{} { return nil }
func (f fakeWorkload) finish(*Report, []*stats)   {}
func (f fakeWorkload) progress() string           { return "" }

// fakeReport builds a lock report over a 2s window from known samples:
// client i records acquires of (i+1)*1ms .. and releases of 1..1000µs.
func fakeReport(t *testing.T, clients int) (*Report, []*stats) {
	t.Helper()
	cfg := Config{Endpoints: []string{"http://x"}, Workload: Lock, Clients: clients, Resources: 1024,
		Duration: 2 * time.Second, Warmup: time.Second, Wait: time.Second}
	cfg.setDefaults()
	r := &runner{cfg: cfg, stopped: make(chan struct{})}
	start := time.Now()
	r.measureStart, r.measureEnd = start, start.Add(2*time.Second)
	st := make([]*stats, clients)
	for i := range st {
		st[i] = newStats(2)
		for j := 1; j <= 1000; j++ {
			st[i].ops[opAcquire].Record(time.Duration(i+1) * time.Millisecond)
			st[i].ops[opRelease].Record(time.Duration(j) * time.Microsecond)
		}
	}
	st[0].errs["unavailable"] = 3
	st[1%clients].errs["held"] = 2
	r.counted.Store(int64(1000 * clients))
	rep := newReport(cfg, fakeWorkload{[]string{"acquire", "release"}, "pairs"}, r, st, 3*time.Second)
	return rep, st
}

func TestReportFigures(t *testing.T) {
	rep, _ := fakeReport(t, 4)
	if rep.Throughput.Count != 4000 || rep.Throughput.PerSecond != 2000 || rep.Throughput.Unit != "pairs" {
		t.Errorf("throughput %+v, want 4000 pairs at 2000/s", rep.Throughput)
	}
	rel := rep.Ops[1]
	if rel.Count != 4000 || rel.PerSecond != 2000 || rel.MinMs != 0.001 || rel.MaxMs != 1 {
		t.Errorf("release %+v", rel)
	}
	// Samples 1..1000µs: nearest-rank p50 is 500µs, reported as the top of
	// its bucket (within 1/128).
	for _, c := range []struct{ got, want float64 }{{rel.P50Ms, 0.5}, {rel.P90Ms, 0.9}, {rel.P99Ms, 0.99}, {rel.P999Ms, 0.999}} {
		if c.got < c.want || c.got > c.want*(1+1.0/subCount)+1e-3 {
			t.Errorf("percentile %v ms, want about %v", c.got, c.want)
		}
	}
	acq := rep.Ops[0]
	if acq.MinMs != 1 || acq.MaxMs != 4 || acq.MeanMs != 2.5 {
		t.Errorf("acquire %+v", acq)
	}
	if rep.Errors["unavailable"] != 3 || rep.Errors["held"] != 2 || len(rep.Errors) != 2 {
		t.Errorf("errors %v", rep.Errors)
	}
}

func TestFairness(t *testing.T) {
	_, st := fakeReport(t, 4)
	// Client i waits (i+1)ms every time: means 1..4ms, overall 2.5ms.
	f := fairness(st, opAcquire)
	if f.Clients != 4 || f.Starved != 0 || f.MeanWaitMs != 2.5 || f.ClientMeanMinMs != 1 || f.ClientMeanMaxMs != 4 {
		t.Errorf("fairness %+v", f)
	}
	if f.MaxMeanRatio != 1.6 || f.MaxWaitRatio != 1.6 || f.JainIndex != 1 || !f.Fair {
		t.Errorf("ratios %+v", f)
	}
	// Population std dev of 1,2,3,4 is sqrt(1.25); over mean 2.5.
	if f.SpreadCV != 0.447 {
		t.Errorf("spread %v, want 0.447", f.SpreadCV)
	}

	// A starved client and one that waits far longer are unfair.
	st = append(st, newStats(2))
	for range 10 {
		st[0].ops[opAcquire].Record(time.Second)
	}
	f = fairness(st, opAcquire)
	if f.Fair || f.Starved != 1 || f.GrantsMin != 0 || f.GrantsMax != 1010 || f.JainIndex >= 0.9 {
		t.Errorf("unfair run reported %+v", f)
	}
}

func TestWriteText(t *testing.T) {
	rep, st := fakeReport(t, 4)
	rep.Fairness = fairness(st, opAcquire)
	rep.ProcessCPUSeconds, rep.CPUPerOpUs, rep.LogEntries, rep.LogEntriesPerOp = 2.32, 580, 2000, 0.5
	rep.Renew = &RenewReport{Leases: 100000, Granted: 100000, SetupSeconds: 12.5, SetupRate: 8000, Period: "10s",
		RequiredRate: 10000, Lost: 3, LostNotFound: 1, LostDeadline: 2, HeldAtEnd: 99997}
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"leasehold bench: lock on [http://x]",
		"4 clients, 1024 resources",
		"throughput  2,000 pairs/s  (4,000 pairs)",
		"cpu         2.3s of this process, 580µs per pair",
		"raft log    2,000 entries committed, 0.500 per pair",
		"operation", "p99.9",
		"acquire  4,000    2,000  2.50ms  2.01ms  4.00ms  4.00ms  4.00ms  4.00ms",
		"max/mean 1.60x (target <= 2x: ok)",
		"100,000 requested",
		"lost      3 (server no longer had it: 1; local deadline passed: 2); held at end 99,997",
		"errors (whole run, by code)", "held               2", "unavailable        3",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	rep.Errors = map[string]int64{}
	b.Reset()
	rep.WriteText(&b)
	if !strings.Contains(b.String(), "errors    none") {
		t.Errorf("no errors not said:\n%s", b.String())
	}
}

func TestWriteJSON(t *testing.T) {
	rep, st := fakeReport(t, 2)
	rep.Fairness = fairness(st, opAcquire)
	var b bytes.Buffer
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Throughput != rep.Throughput || len(back.Ops) != 2 || back.Ops[1] != rep.Ops[1] ||
		back.Fairness == nil || *back.Fairness != *rep.Fairness || back.Errors["unavailable"] != 3 {
		t.Errorf("JSON round trip lost figures:\n%s", b.String())
	}
	for _, key := range []string{`"p999_ms"`, `"per_second"`, `"workload": "lock"`, `"measured_s": 2`} {
		if !strings.Contains(b.String(), key) {
			t.Errorf("JSON lacks %s", key)
		}
	}
}

func checkSVG(t *testing.T, r io.Reader) {
	t.Helper()
	dec := xml.NewDecoder(r)
	var root string
	lines := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
			}
			if se.Name.Local == "polyline" {
				lines++
			}
		}
	}
	if root != "svg" || lines != 2 {
		t.Errorf("root %q with %d polylines; want svg with 2", root, lines)
	}
}

func TestPlots(t *testing.T) {
	rep, _ := fakeReport(t, 3)
	rep.Ops[0].Name = `acquire <&"x">` // must be escaped
	var b bytes.Buffer
	if err := rep.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, &b)

	dir := t.TempDir()
	path := filepath.Join(dir, "p.svg")
	if err := rep.WritePlot(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	checkSVG(t, f)
	f.Close()
	for _, name := range []string{"p.png", "p.gif"} {
		if err := rep.WritePlot(filepath.Join(dir, name)); err == nil || !strings.Contains(err.Error(), "must end in .svg") {
			t.Errorf("plot %s: %v, want a refusal naming .svg", name, err)
		}
	}

	// A run that measured nothing still plots (empty axes).
	empty := &Report{Workload: Lock, Ops: []OpReport{{Name: "acquire"}}, hists: []*Hist{{}}}
	b.Reset()
	if err := empty.WriteSVG(&b); err != nil || !strings.Contains(b.String(), "</svg>") {
		t.Errorf("empty plot: %v", err)
	}
}

func TestFormatting(t *testing.T) {
	for _, c := range []struct {
		ms   float64
		want string
	}{{0, "0"}, {0.0004, "400ns"}, {0.0123, "12.3µs"}, {0.5, "500µs"}, {1.234, "1.23ms"}, {12.34, "12.3ms"}, {1234, "1.23s"}} {
		if got := fmtMs(c.ms); got != c.want {
			t.Errorf("fmtMs(%v) = %q, want %q", c.ms, got, c.want)
		}
	}
	for _, c := range []struct {
		x    float64
		want string
	}{{0, "0.0"}, {12.34, "12.3"}, {99.94, "99.9"}, {1234.4, "1,234"}, {1234567.6, "1,234,568"}} {
		if got := commasF(c.x); got != c.want {
			t.Errorf("commasF(%v) = %q, want %q", c.x, got, c.want)
		}
	}
	if ninesLabel(0) != "0%" || ninesLabel(1) != "90%" || ninesLabel(2) != "99%" || ninesLabel(4) != "99.99%" {
		t.Error("nines labels")
	}
	if tickLabel(2.5, 10) != "2.5ms" || tickLabel(0.2, 0.5) != "200µs" || tickLabel(2000, 5000) != "2s" {
		t.Error("tick labels")
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Endpoints: []string{"http://x"}, Workload: Lock, Clients: 1, Resources: 1, Duration: time.Second}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Config){
		"no endpoints":  func(c *Config) { c.Endpoints = nil },
		"workload":      func(c *Config) { c.Workload = "nope" },
		"clients":       func(c *Config) { c.Clients = 0 },
		"resources":     func(c *Config) { c.Resources = 0 },
		"no end":        func(c *Config) { c.Duration = 0 },
		"negative hold": func(c *Config) { c.Hold = -1 },
		"leases":        func(c *Config) { c.Workload, c.Leases = Renew, 0 },
		"short ttl":     func(c *Config) { c.Workload, c.Leases, c.TTL = Renew, 1, 200*time.Millisecond },
	} {
		c := ok
		mut(&c)
		if c.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
