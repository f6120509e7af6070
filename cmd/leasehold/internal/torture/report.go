package torture

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/leasehold/leasehold/internal/history"
)

// Report is a run's figures, as the table and -o json show them.
type Report struct {
	Target          string         `json:"target"`
	Prefix          string         `json:"prefix"`
	Duration        string         `json:"duration"`
	Interrupted     bool           `json:"interrupted,omitempty"`
	Operations      int64          `json:"operations"`
	Faults          int            `json:"faults"`
	FaultsByClass   map[string]int `json:"faults_by_class"`
	FaultErrors     int            `json:"fault_errors"`
	Linearizability string         `json:"linearizability"`
	QueueDrained    bool           `json:"queue_drained"`
	// The violations counted: each must be 0.
	AckedLost           int `json:"acked_lost"`
	TokensReused        int `json:"tokens_reused"`
	StaleWritesAccepted int `json:"stale_writes_accepted"`
	OrderViolations     int `json:"order_violations"`
	AckedTwice          int `json:"acked_twice"`
	DoubleOwners        int `json:"double_owners"`
	LapsedEarly         int `json:"lapsed_early"`
	DoubleCompletions   int `json:"double_completions"`
	NotLinearizable     int `json:"not_linearizable"`
	BadRecords          int `json:"bad_records"`

	Primitives []PrimitiveFigures  `json:"primitives"`
	FaultLog   []faultRecord       `json:"fault_log"`
	Violations []history.Violation `json:"violations,omitempty"`
	Excerpt    map[int64]Op        `json:"excerpt,omitempty"` // the operations the violations name
}

// PrimitiveFigures are one primitive's operations and latency.
type PrimitiveFigures struct {
	Primitive string  `json:"primitive"`
	Ops       int64   `json:"ops"`
	OK        int64   `json:"ok"`
	Refused   int64   `json:"refused"`
	Unknown   int64   `json:"unknown"`
	P50ms     float64 `json:"p50_ms"`
	P99ms     float64 `json:"p99_ms"`
	MaxMs     float64 `json:"max_ms"`
}

// Violated is the number of violations of every kind.
func (r *Report) Violated() int { return len(r.Violations) }

func (r *run) report(vs []history.Violation) *Report {
	rec := r.rec
	rep := &Report{Prefix: r.cfg.Prefix, Duration: r.cfg.Duration.String(), Violations: vs, FaultsByClass: map[string]int{},
		Excerpt: map[int64]Op{}, FaultLog: []faultRecord{}, Primitives: []PrimitiveFigures{}}
	rep.Target = strings.Join(r.endpoints, ",")
	if r.local != nil {
		rep.Target = fmt.Sprintf("%d local nodes (%s)", r.cfg.Local, rep.Target)
	}
	for _, v := range vs {
		switch v.Check {
		case history.CheckLost:
			rep.AckedLost++
		case history.CheckTokenReused:
			rep.TokensReused++
		case history.CheckStaleWrite:
			rep.StaleWritesAccepted++
		case history.CheckOrder:
			rep.OrderViolations++
		case history.CheckAckedTwice:
			rep.AckedTwice++
		case history.CheckOverlap:
			rep.DoubleOwners++
		case history.CheckTTL:
			rep.LapsedEarly++
		case history.CheckCompletedTwice:
			rep.DoubleCompletions++
		case history.CheckLinearizable:
			rep.NotLinearizable++
		default:
			rep.BadRecords++
		}
		for _, id := range v.Ops {
			if op, ok := rec.op(id); ok {
				rep.Excerpt[id] = op
			}
		}
	}
	recs := rec.records()
	for _, f := range recs.faults {
		rep.Faults++
		rep.FaultsByClass[f.Class]++
		if f.Err != "" || (f.Exit != nil && *f.Exit != 0) {
			rep.FaultErrors++
		}
	}
	rep.FaultLog = append(rep.FaultLog, recs.faults...)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for prim, s := range rec.stats {
		rep.Operations += s.ops
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		rep.Primitives = append(rep.Primitives, PrimitiveFigures{Primitive: prim, Ops: s.ops, OK: s.ok, Refused: s.refused,
			Unknown: s.unknown, P50ms: ms(s.lat.Quantile(0.5)), P99ms: ms(s.lat.Quantile(0.99)), MaxMs: ms(s.lat.Max())})
	}
	sort.Slice(rep.Primitives, func(i, j int) bool { return rep.Primitives[i].Primitive < rep.Primitives[j].Primitive })
	return rep
}

// WriteJSON writes the report as one JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// maxExcerpt bounds the violations the text report shows in full.
const maxExcerpt = 10

// WriteText writes the figures as tables, then each violation (the first
// maxExcerpt) with the recorded operations that show it.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "target\t%s\n", r.Target)
	fmt.Fprintf(tw, "prefix\t%s\n", r.Prefix)
	fmt.Fprintf(tw, "duration\t%s%s\n", r.Duration, map[bool]string{true: " (interrupted)"}[r.Interrupted])
	fmt.Fprintf(tw, "operations\t%d\n", r.Operations)
	var classes []string
	for c, n := range r.FaultsByClass {
		classes = append(classes, fmt.Sprintf("%s %d", c, n))
	}
	sort.Strings(classes)
	fmt.Fprintf(tw, "faults\t%d\t%s\n", r.Faults, strings.Join(classes, ", "))
	if r.FaultErrors > 0 {
		fmt.Fprintf(tw, "fault errors\t%d\t(see the fault log: -o json)\n", r.FaultErrors)
	}
	fmt.Fprintf(tw, "linearizability\t%s\n", r.Linearizability)
	for _, f := range []struct {
		name string
		n    int
	}{{"acked_lost", r.AckedLost}, {"tokens_reused", r.TokensReused}, {"stale_writes_accepted", r.StaleWritesAccepted},
		{"order_violations", r.OrderViolations}, {"acked_twice", r.AckedTwice}, {"double_owners", r.DoubleOwners},
		{"lapsed_early", r.LapsedEarly}, {"double_completions", r.DoubleCompletions}, {"not_linearizable", r.NotLinearizable},
		{"bad_records", r.BadRecords}} {
		fmt.Fprintf(tw, "%s\t%d\n", f.name, f.n)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "PRIMITIVE\tOPS\tOK\tREFUSED\tUNKNOWN\tP50 MS\tP99 MS\tMAX MS\t")
	for _, p := range r.Primitives {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t\n", p.Primitive, p.Ops, p.OK, p.Refused, p.Unknown, p.P50ms, p.P99ms, p.MaxMs)
	}
	tw.Flush()
	if len(r.Violations) == 0 {
		fmt.Fprintln(w, "\nno violations")
		return nil
	}
	fmt.Fprintf(w, "\n%d VIOLATIONS\n", len(r.Violations))
	for i, v := range r.Violations {
		if i == maxExcerpt {
			fmt.Fprintf(w, "... and %d more (every one in -o json)\n", len(r.Violations)-maxExcerpt)
			break
		}
		fmt.Fprintf(w, "\n%s: %s\n", v.Check, v.Msg)
		for _, id := range v.Ops {
			if op, ok := r.Excerpt[id]; ok {
				b, _ := json.Marshal(op)
				fmt.Fprintf(w, "  %s\n", b)
			}
		}
	}
	return nil
}
