package main

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// order lists the targets that ran, etcd first.
func order(results []result) []string {
	ts := []string{targetEtcd}
	for _, t := range []string{targetOwn, targetShared, targetBaseOwn, targetBaseShared} {
		for _, r := range results {
			if r.Target == t {
				ts = append(ts, t)
				break
			}
		}
	}
	return ts
}

// markdown renders the results as docs/benchmarks.md's tables: throughput and
// latency per scenario with ratios to etcd, then the contended waits
// against their FIFO bound.
func markdown(all []result, warmup, measure time.Duration) string {
	results := of(all, primLock)
	targets := order(results)
	by := map[scenario]map[string]result{}
	var order []scenario
	for _, r := range results {
		if by[r.scenario] == nil {
			by[r.scenario] = map[string]result{}
			order = append(order, r.scenario)
		}
		by[r.scenario][r.Target] = r
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Rounds of %v after %v of warm-up, targets alternating.\n\n", measure, warmup)
	if len(results) == 0 {
		primitives(&b, all)
		return b.String()
	}
	b.WriteString("Locks: pairs/s (× etcd), acquire p50 / p99.\n\n")
	b.WriteString("| nodes | resources | workers | " + strings.Join(targets, " | ") + " |\n")
	b.WriteString("|---|---|---" + strings.Repeat("|---", len(targets)) + "|\n")
	for _, sc := range order {
		e := by[sc][targetEtcd]
		fmt.Fprintf(&b, "| %d | %d | %d | %s |", sc.Nodes, sc.Resources, sc.Workers, cell(e, 0))
		for _, t := range targets[1:] {
			fmt.Fprintf(&b, " %s |", cell(by[sc][t], e.PairsPerS))
		}
		b.WriteString("\n")
	}
	b.WriteString("\nCPU per pair in the measured window: the nodes' processes together + the client process (µs); heap allocations per pair: the nodes' (their go_memstats_mallocs_total) + the client process's.\n\n")
	b.WriteString("| nodes | resources | workers | " + strings.Join(targets, " | ") + " |\n")
	b.WriteString("|---|---|---" + strings.Repeat("|---", len(targets)) + "|\n")
	for _, sc := range order {
		fmt.Fprintf(&b, "| %d | %d | %d |", sc.Nodes, sc.Resources, sc.Workers)
		for _, t := range targets {
			r := by[sc][t]
			fmt.Fprintf(&b, " %d + %d µs, %s allocs |", r.NodeCPU.Microseconds(), r.ClientCPU.Microseconds(), allocs(r))
		}
		b.WriteString("\n")
	}
	b.WriteString("\nOne resource: each acquire's wait against its FIFO bound (the workers ahead of it when it asked, holder included, × the round's mean hand-off).\n\n")
	b.WriteString("| nodes | workers | target | ahead (mean) | hand-off mean / p50 / p99 / max | bound | wait p50 / p99 / max | p99 ÷ bound | waits over 2× their bound |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, sc := range order {
		for _, t := range targets {
			r, ok := by[sc][t]
			if !ok || r.Fifo == nil {
				continue
			}
			f := r.Fifo
			fmt.Fprintf(&b, "| %d | %d | %s | %.1f | %s / %s / %s / %s | %s | %s / %s / %s | %.2f | %.2f%% |\n",
				sc.Nodes, sc.Workers, t, f.MeanAhead, ms(f.MeanHandoff), ms(f.HandoffP50), ms(f.HandoffP99), ms(f.HandoffMax), ms(f.Bound),
				ms(f.WaitP50), ms(f.WaitP99), ms(f.WaitMax), float64(f.WaitP99)/float64(max(f.Bound, 1)), 100*f.Over2x)
		}
	}
	primitives(&b, all)
	return b.String()
}

// of is the results of one primitive.
func of(results []result, prim string) []result {
	var out []result
	for _, r := range results {
		if r.Primitive == prim || (prim == primLock && r.Primitive == "") {
			out = append(out, r)
		}
	}
	return out
}

func allocs(r result) string {
	if r.NodeAllocs < 0 {
		return fmt.Sprintf("– + %.0f", r.ClientAllocs)
	}
	return fmt.Sprintf("%.0f + %.0f", r.NodeAllocs, r.ClientAllocs)
}

// primitives renders the queue and idempotency rounds: per second (×
// the Postgres target), latency, CPU and allocations per operation.
func primitives(b *strings.Builder, all []result) {
	for _, p := range []struct{ prim, head, base string }{
		{primQueue, "Keyed queues, per-key order kept: messages acked/s (× Postgres), send-to-ack p50 / p99; CPU per message, servers + client process; heap allocations per message, servers (Go servers only) + client process; deliveries out of order.", targetQPostgres},
		{primIdem, "Idempotency keys: begin+complete pairs/s (× Postgres), pair p50 / p99; CPU per pair, servers + client process; heap allocations per pair, servers (Go servers only) + client process.", targetIPostgres},
	} {
		rs := of(all, p.prim)
		if len(rs) == 0 {
			continue
		}
		by := map[scenario]map[string]result{}
		var scs []scenario
		var targets []string
		seen := map[string]bool{}
		for _, r := range rs {
			if by[r.scenario] == nil {
				by[r.scenario] = map[string]result{}
				scs = append(scs, r.scenario)
			}
			by[r.scenario][r.Target] = r
			if !seen[r.Target] {
				seen[r.Target] = true
				targets = append(targets, r.Target)
			}
		}
		// The base first, then the others in the order first seen.
		for i, t := range targets {
			if t == p.base {
				targets = append(append([]string{t}, targets[:i]...), targets[i+1:]...)
				break
			}
		}
		fmt.Fprintf(b, "\n%s\n\n| nodes | workers | target | per second | p50 / p99 | CPU per op | allocs per op | out of order |\n|---|---|---|---|---|---|---|---|\n", p.head)
		for _, sc := range scs {
			base := by[sc][p.base].PairsPerS
			for _, t := range targets {
				r, ok := by[sc][t]
				if !ok {
					continue
				}
				rate := fmt.Sprintf("%.0f", r.PairsPerS)
				if t != p.base && base > 0 {
					rate += fmt.Sprintf(" (%.1f×)", r.PairsPerS/base)
				}
				if r.Errors > 0 {
					rate += fmt.Sprintf(", %d errors", r.Errors)
				}
				ooo := "–"
				if p.prim == primQueue {
					ooo = fmt.Sprintf("%d", r.OrderViolations)
				}
				fmt.Fprintf(b, "| %d | %d | %s | %s | %s / %s | %d + %d µs | %s | %s |\n", sc.Nodes, sc.Workers, t, rate,
					ms(r.AcquireP50), ms(r.AcquireP99), r.NodeCPU.Microseconds(), r.ClientCPU.Microseconds(), allocs(r), ooo)
			}
		}
	}
}

func cell(r result, etcd float64) string {
	s := fmt.Sprintf("%.0f", r.PairsPerS)
	if etcd > 0 {
		s += fmt.Sprintf(" (%.1f×)", r.PairsPerS/etcd)
	}
	s += fmt.Sprintf(", %s / %s", ms(r.AcquireP50), ms(r.AcquireP99))
	if r.Errors > 0 {
		s += fmt.Sprintf(", %d errors", r.Errors)
	}
	return s
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

// plot draws pairs/s per scenario, one bar per target, on a log scale.
func plot(all []result) string {
	results := of(all, primLock)
	targets := order(results)
	var scs []scenario
	val := map[scenario]map[string]float64{}
	for _, r := range results {
		if val[r.scenario] == nil {
			val[r.scenario] = map[string]float64{}
			scs = append(scs, r.scenario)
		}
		val[r.scenario][r.Target] = r.PairsPerS
	}
	const left, top, plotH, barW = 70, 40, 300, 18
	groupW := 12 + barW*len(targets)
	width := left + len(scs)*groupW + 20
	height := top + plotH + 90
	colors := map[string]string{targetEtcd: "#888888", targetOwn: "#4c78a8", targetShared: "#f58518",
		targetBaseOwn: "#9ecae9", targetBaseShared: "#ffbf79"}
	lo, hi := 10.0, 100000.0
	y := func(v float64) float64 {
		v = math.Min(math.Max(v, lo), hi)
		return top + plotH - plotH*math.Log10(v/lo)/math.Log10(hi/lo)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="20" font-size="14">lock pairs per second (log scale): etcd vs leasehold</text>`+"\n", left)
	for v := lo; v <= hi; v *= 10 {
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%.0f</text>`+"\n",
			left, width-20, y(v), y(v), left-6, y(v)+4, v)
	}
	for i, sc := range scs {
		x0 := left + i*groupW + 6
		for j, t := range targets {
			v, ok := val[sc][t]
			if !ok {
				continue
			}
			fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"><title>%s: %.0f pairs/s</title></rect>`+"\n",
				x0+j*barW, y(v), barW-2, top+plotH-y(v), colors[t], t, v)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%dn %dw</text><text x="%d" y="%d" text-anchor="middle">%d res</text>`+"\n",
			x0+groupW/2-6, top+plotH+16, sc.Nodes, sc.Workers, x0+groupW/2-6, top+plotH+30, sc.Resources)
	}
	for j, t := range targets {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			left+j*220, top+plotH+52, colors[t], left+j*220+16, top+plotH+62, t)
	}
	b.WriteString("</svg>\n")
	return b.String()
}
