package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
)

// Report is the result of a run. Its JSON form (WriteJSON) carries the same
// figures as the table (WriteText); latencies are in milliseconds.
type Report struct {
	Workload   string    `json:"workload"`
	Target     string    `json:"target"`
	Clients    int       `json:"clients"`
	Resources  int       `json:"resources,omitempty"`
	Leases     int       `json:"leases,omitempty"`
	Batch      int       `json:"batch,omitempty"`      // queue: messages per send, most per receive
	BodyBytes  int       `json:"body_bytes,omitempty"` // queue: bytes per message
	Hold       string    `json:"hold"`
	TTL        string    `json:"ttl"`
	Wait       string    `json:"wait,omitempty"`
	Warmup     string    `json:"warmup"`
	Duration   string    `json:"duration,omitempty"`
	OpsLimit   int64     `json:"ops_limit,omitempty"`
	GoMaxProcs int       `json:"gomaxprocs"`
	Started    time.Time `json:"started"`

	MeasuredSeconds float64 `json:"measured_s"`
	TotalSeconds    float64 `json:"total_s"`
	// Interrupted: the run was stopped (SIGINT) before its end; the figures
	// cover what was measured until then.
	Interrupted bool `json:"interrupted"`

	Throughput Throughput `json:"throughput"`
	// ProcessCPUSeconds is the CPU time this process used while measuring
	// (with an embedded node: client and node together), and CPUPerOpUs
	// that over Throughput.Count, in microseconds. Unlike throughput, it
	// hardly depends on what else the machine runs.
	ProcessCPUSeconds float64 `json:"process_cpu_s"`
	CPUPerOpUs        float64 `json:"cpu_per_op_us"`
	// LogEntries is how many raft log entries the node committed while
	// measuring (embedded node only), and LogEntriesPerOp that over
	// Throughput.Count: below the commands per operation means requests
	// shared entries (and fsyncs).
	LogEntries      uint64     `json:"log_entries,omitempty"`
	LogEntriesPerOp float64    `json:"log_entries_per_op,omitempty"`
	Ops             []OpReport `json:"ops"`
	// Errors counts failed operations by leasehold error code, over the
	// whole run (warm-up and set-up included).
	Errors   map[string]int64 `json:"errors"`
	Fairness *Fairness        `json:"fairness,omitempty"`
	Renew    *RenewReport     `json:"renew,omitempty"`

	hists []*Hist // parallel to Ops, for plots
}

// Throughput is the rate of the workload's main operation: acquire+release
// pairs (lock), grants (contend) or renewals (renew).
type Throughput struct {
	Unit      string  `json:"unit"`
	Count     int64   `json:"count"`
	PerSecond float64 `json:"per_second"`
}

// OpReport is the latency of one kind of operation, measured from just
// before the client call to its return.
type OpReport struct {
	Name      string  `json:"name"`
	Count     int64   `json:"count"`
	PerSecond float64 `json:"per_second"`
	MeanMs    float64 `json:"mean_ms"`
	MinMs     float64 `json:"min_ms"`
	P50Ms     float64 `json:"p50_ms"`
	P90Ms     float64 `json:"p90_ms"`
	P99Ms     float64 `json:"p99_ms"`
	P999Ms    float64 `json:"p999_ms"`
	MaxMs     float64 `json:"max_ms"`
}

// Fairness describes how evenly contending clients were served; waits are
// from sending an acquire until its grant. The target is that no
// client waits more than twice the mean (MaxMeanRatio <= 2).
type Fairness struct {
	Clients int `json:"clients"`
	// Starved clients got no grant while measuring.
	Starved    int     `json:"starved"`
	MeanWaitMs float64 `json:"mean_wait_ms"`
	// Per-client mean waits.
	ClientMeanMinMs float64 `json:"client_mean_min_ms"`
	ClientMeanMaxMs float64 `json:"client_mean_max_ms"`
	// MaxMeanRatio is the largest per-client mean wait over the mean wait.
	MaxMeanRatio float64 `json:"max_mean_ratio"`
	// MaxWaitRatio is the longest single wait over the mean wait.
	MaxWaitRatio float64 `json:"max_wait_ratio"`
	// SpreadCV is the coefficient of variation of the per-client mean
	// waits (their standard deviation over their mean).
	SpreadCV  float64 `json:"spread_cv"`
	GrantsMin int64   `json:"grants_min"`
	GrantsMax int64   `json:"grants_max"`
	// JainIndex of grants per client: 1 when all got the same, 1/n when
	// one got all.
	JainIndex float64 `json:"jain_index"`
	// Fair: no starved client and MaxMeanRatio <= 2.
	Fair bool `json:"fair"`
}

// RenewReport is the renew workload's own figures.
type RenewReport struct {
	Leases       int     `json:"leases"`
	Granted      int64   `json:"granted"`
	SetupSeconds float64 `json:"setup_s"`
	SetupRate    float64 `json:"setup_per_second"`
	Period       string  `json:"renew_every"`
	// RequiredRate is the renew rate the held leases need (granted/period);
	// the sustained rate is Report.Throughput.PerSecond.
	RequiredRate float64 `json:"required_per_second"`
	Lost         int64   `json:"lost"`
	LostNotFound int64   `json:"lost_not_found"`
	LostDeadline int64   `json:"lost_deadline"`
	HeldAtEnd    int64   `json:"held_at_end"`
	Released     int64   `json:"released,omitempty"`
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

func newReport(cfg Config, w workload, r *runner, st []*stats, total time.Duration) *Report {
	window := r.window()
	rep := &Report{
		Workload:        cfg.Workload,
		Target:          cfg.Target,
		Clients:         cfg.Clients,
		Hold:            cfg.Hold.String(),
		TTL:             cfg.TTL.String(),
		Warmup:          cfg.Warmup.String(),
		OpsLimit:        cfg.Ops,
		GoMaxProcs:      runtime.GOMAXPROCS(0),
		Started:         time.Now().Add(-total).UTC().Truncate(time.Second),
		MeasuredSeconds: math.Round(window.Seconds()*1e3) / 1e3,
		TotalSeconds:    math.Round(total.Seconds()*1e3) / 1e3,
		Errors:          map[string]int64{},
	}
	r.mu.Lock()
	rep.Interrupted = r.interrupted
	r.mu.Unlock()
	if cfg.Duration > 0 {
		rep.Duration = cfg.Duration.String()
	}
	switch cfg.Workload {
	case Lock:
		rep.Resources = cfg.Resources
		rep.Wait = cfg.Wait.String()
	case Contend:
		rep.Resources = 1
		rep.Wait = cfg.Wait.String()
	case Renew:
		rep.Leases = cfg.Leases
	case Queue:
		rep.Resources, rep.Batch, rep.BodyBytes = cfg.Resources, cfg.Batch, cfg.BodyBytes
	}
	n := r.measuredCount()
	rep.Throughput = Throughput{Unit: w.unit(), Count: n, PerSecond: rate(n, window)}
	r.mu.Lock()
	cpu := r.cpuEnd - r.cpuStart
	if r.idxEnd > r.idxStart {
		rep.LogEntries = r.idxEnd - r.idxStart
		if n > 0 {
			rep.LogEntriesPerOp = round3(float64(rep.LogEntries) / float64(n))
		}
	}
	r.mu.Unlock()
	if cpu > 0 {
		rep.ProcessCPUSeconds = round3(cpu.Seconds())
		if n > 0 {
			rep.CPUPerOpUs = math.Round(float64(cpu.Microseconds())/float64(n)*10) / 10
		}
	}
	for i, name := range w.opNames() {
		h := &Hist{}
		for _, s := range st {
			h.Merge(&s.ops[i])
		}
		rep.hists = append(rep.hists, h)
		rep.Ops = append(rep.Ops, opReport(name, h, window))
	}
	for _, s := range st {
		for k, v := range s.errs {
			rep.Errors[k] += v
		}
	}
	return rep
}

func rate(n int64, window time.Duration) float64 {
	if window <= 0 {
		return 0
	}
	return math.Round(float64(n)/window.Seconds()*10) / 10
}

func opReport(name string, h *Hist, window time.Duration) OpReport {
	return OpReport{
		Name: name, Count: h.Count(), PerSecond: rate(h.Count(), window),
		MeanMs: ms(h.Mean()), MinMs: ms(h.Min()),
		P50Ms: ms(h.Quantile(0.5)), P90Ms: ms(h.Quantile(0.9)), P99Ms: ms(h.Quantile(0.99)),
		P999Ms: ms(h.Quantile(0.999)), MaxMs: ms(h.Max()),
	}
}

// fairness computes the contend workload's fairness from each client's
// wait histogram (stats.ops[op]).
func fairness(st []*stats, op int) *Fairness {
	f := &Fairness{Clients: len(st)}
	var all Hist
	var means []float64
	var sum, sumSq float64
	f.GrantsMin = math.MaxInt64
	for _, s := range st {
		h := &s.ops[op]
		all.Merge(h)
		g := h.Count()
		f.GrantsMin = min(f.GrantsMin, g)
		f.GrantsMax = max(f.GrantsMax, g)
		sum += float64(g)
		sumSq += float64(g) * float64(g)
		if g == 0 {
			f.Starved++
			continue
		}
		means = append(means, float64(h.Mean()))
	}
	if len(st) == 0 {
		f.GrantsMin = 0
	}
	if sumSq > 0 {
		f.JainIndex = round3(sum * sum / (float64(len(st)) * sumSq))
	}
	mean := float64(all.Mean())
	f.MeanWaitMs = ms(all.Mean())
	if len(means) > 0 && mean > 0 {
		lo, hi := slices.Min(means), slices.Max(means)
		f.ClientMeanMinMs = ms(time.Duration(lo))
		f.ClientMeanMaxMs = ms(time.Duration(hi))
		f.MaxMeanRatio = round3(hi / mean)
		f.MaxWaitRatio = round3(float64(all.Max()) / mean)
		var m, v float64
		for _, x := range means {
			m += x
		}
		m /= float64(len(means))
		for _, x := range means {
			v += (x - m) * (x - m)
		}
		f.SpreadCV = round3(math.Sqrt(v/float64(len(means))) / m)
	}
	f.Fair = f.Starved == 0 && all.Count() > 0 && f.MaxMeanRatio <= 2
	return f
}

func round3(x float64) float64 { return math.Round(x*1e3) / 1e3 }

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteText writes the report as a table for people.
func (rep *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "leasehold bench: %s on %s\n", rep.Workload, rep.Target)
	fmt.Fprintf(&b, "  %d clients", rep.Clients)
	switch rep.Workload {
	case Lock:
		fmt.Fprintf(&b, ", %d resources", rep.Resources)
	case Contend:
		b.WriteString(", 1 resource")
	case Renew:
		fmt.Fprintf(&b, " (renewal pool), %s leases", humanize.Comma(int64(rep.Leases)))
	case Queue:
		fmt.Fprintf(&b, " (producers, and as many consumers), %d keys, batch %d, %d-byte messages", rep.Resources, rep.Batch, rep.BodyBytes)
	}
	if rep.Workload != Queue {
		fmt.Fprintf(&b, ", hold %s, ttl %s", rep.Hold, rep.TTL)
	}
	if rep.Wait != "" {
		fmt.Fprintf(&b, ", wait up to %s", rep.Wait)
	}
	fmt.Fprintf(&b, "\n  measured %.2fs after %s warm-up (run %.1fs, GOMAXPROCS %d)", rep.MeasuredSeconds, rep.Warmup, rep.TotalSeconds, rep.GoMaxProcs)
	if rep.Interrupted {
		b.WriteString(", INTERRUPTED")
	}
	b.WriteString("\n\n")
	fmt.Fprintf(&b, "throughput  %s %s/s  (%s %s)\n",
		commasF(rep.Throughput.PerSecond), rep.Throughput.Unit, humanize.Comma(rep.Throughput.Count), rep.Throughput.Unit)
	if rep.CPUPerOpUs > 0 {
		fmt.Fprintf(&b, "cpu         %.1fs of this process, %s per %s\n", rep.ProcessCPUSeconds,
			fmtMs(rep.CPUPerOpUs/1e3), strings.TrimSuffix(rep.Throughput.Unit, "s"))
	}
	if rep.LogEntries > 0 {
		fmt.Fprintf(&b, "raft log    %s entries committed, %.3f per %s\n", humanize.Comma(int64(rep.LogEntries)),
			rep.LogEntriesPerOp, strings.TrimSuffix(rep.Throughput.Unit, "s"))
	}
	b.WriteString("\n")

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "operation\tcount\tper sec\tmean\tp50\tp90\tp99\tp99.9\tmax\t")
	for _, o := range rep.Ops {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", o.Name, humanize.Comma(o.Count), commasF(o.PerSecond),
			fmtMs(o.MeanMs), fmtMs(o.P50Ms), fmtMs(o.P90Ms), fmtMs(o.P99Ms), fmtMs(o.P999Ms), fmtMs(o.MaxMs))
	}
	tw.Flush()

	if f := rep.Fairness; f != nil {
		verdict := "ok"
		if !f.Fair {
			verdict = "NOT MET"
		}
		fmt.Fprintf(&b, "\nfairness (wait from acquire to grant, %d clients)\n", f.Clients)
		fmt.Fprintf(&b, "  mean wait            %s\n", fmtMs(f.MeanWaitMs))
		fmt.Fprintf(&b, "  client mean wait     min %s  max %s  max/mean %.2fx (target <= 2x: %s)\n",
			fmtMs(f.ClientMeanMinMs), fmtMs(f.ClientMeanMaxMs), f.MaxMeanRatio, verdict)
		fmt.Fprintf(&b, "  longest single wait  %.2fx the mean\n", f.MaxWaitRatio)
		fmt.Fprintf(&b, "  spread               %.1f%% (coefficient of variation of client means)\n", 100*f.SpreadCV)
		fmt.Fprintf(&b, "  grants per client    min %s  max %s  Jain index %.3f", humanize.Comma(f.GrantsMin), humanize.Comma(f.GrantsMax), f.JainIndex)
		if f.Starved > 0 {
			fmt.Fprintf(&b, "  (%d clients starved)", f.Starved)
		}
		b.WriteString("\n")
	}
	if r := rep.Renew; r != nil {
		fmt.Fprintf(&b, "\nleases    %s requested, %s granted in %.1fs (%s/s), renewed every %s\n",
			humanize.Comma(int64(r.Leases)), humanize.Comma(r.Granted), r.SetupSeconds, commasF(r.SetupRate), r.Period)
		fmt.Fprintf(&b, "renewals  sustained %s/s, needed %s/s\n", commasF(rep.Throughput.PerSecond), commasF(r.RequiredRate))
		fmt.Fprintf(&b, "lost      %s (server no longer had it: %s; local deadline passed: %s); held at end %s",
			humanize.Comma(r.Lost), humanize.Comma(r.LostNotFound), humanize.Comma(r.LostDeadline), humanize.Comma(r.HeldAtEnd))
		if r.Released > 0 {
			fmt.Fprintf(&b, "; released %s", humanize.Comma(r.Released))
		}
		b.WriteString("\n")
	}

	b.WriteString("\nerrors")
	if len(rep.Errors) == 0 {
		b.WriteString("    none\n")
	} else {
		codes := make([]string, 0, len(rep.Errors))
		for k := range rep.Errors {
			codes = append(codes, k)
		}
		slices.Sort(codes)
		b.WriteString(" (whole run, by code)\n")
		for _, k := range codes {
			fmt.Fprintf(&b, "  %-18s %s\n", k, humanize.Comma(rep.Errors[k]))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// fmtMs shows a latency given in milliseconds with three significant
// digits and a fitting unit.
func fmtMs(m float64) string {
	d := m * 1e6 // nanoseconds
	switch {
	case d == 0:
		return "0"
	case d < 1e3:
		return fmt.Sprintf("%.0fns", d)
	case d < 1e6:
		return sig3(d/1e3) + "µs"
	case d < 1e9:
		return sig3(d/1e6) + "ms"
	}
	return sig3(d/1e9) + "s"
}

func sig3(x float64) string {
	switch {
	case x >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case x >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

// commasF formats a rate: whole numbers with separators, small rates with
// one decimal.
func commasF(x float64) string {
	if x < 100 {
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return humanize.Comma(int64(math.Round(x)))
}
