package bench

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A latency percentile plot in the manner of HdrHistogram's: the x axis is
// the percentile on a "nines" scale (0, 90, 99, 99.9 ...), so the tail gets
// as much room as the body; the y axis is latency. One line per operation.

const (
	plotW, plotH                       = 820, 480
	marginL, marginR, marginT, marginB = 80, 24, 44, 56
	plotStep                           = 0.02 // in nines
	maxNines                           = 5.0
)

var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xd6, 0x27, 0x28, 0xff}, {0x2c, 0xa0, 0x2c, 0xff},
	{0xff, 0x7f, 0x0e, 0xff}, {0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff},
}

type series struct {
	name string
	pts  [][2]float64 // (nines, latency ms)
}

type tick struct {
	at    float64
	label string
}

type plot struct {
	title      string
	xMax, yMax float64
	xTicks     []tick
	yTicks     []tick
	xLabel     string
	yLabel     string
	series     []series
}

func newPlot(rep *Report) *plot {
	p := &plot{
		title:  fmt.Sprintf("leasehold bench %s: %d clients, %s %s/s", rep.Workload, rep.Clients, commasF(rep.Throughput.PerSecond), rep.Throughput.Unit),
		xLabel: "percentile",
		yLabel: "latency",
	}
	var n int64
	for _, h := range rep.hists {
		n = max(n, h.Count())
	}
	// Beyond log10(n) nines the curve is only the maximum.
	p.xMax = math.Min(maxNines, math.Max(2, math.Ceil(math.Log10(float64(max(n, 1))))))
	for i, h := range rep.hists {
		if h.Count() == 0 {
			continue
		}
		s := series{name: rep.Ops[i].Name}
		for x := 0.0; x <= p.xMax+1e-9; x += plotStep {
			q := 1 - math.Pow(10, -x)
			y := float64(h.Quantile(q)) / 1e6
			s.pts = append(s.pts, [2]float64{x, y})
			p.yMax = math.Max(p.yMax, y)
		}
		p.series = append(p.series, s)
	}
	for x := 0; x <= int(p.xMax); x++ {
		p.xTicks = append(p.xTicks, tick{float64(x), ninesLabel(x)})
	}
	step := niceStep(p.yMax, 6)
	p.yMax = math.Max(step, math.Ceil(p.yMax/step)*step)
	for y := 0.0; y <= p.yMax+step/2; y += step {
		p.yTicks = append(p.yTicks, tick{y, tickLabel(y, p.yMax)})
	}
	return p
}

// tickLabel shows y (milliseconds) in the unit that suits an axis up to
// top, without trailing zeros.
func tickLabel(y, top float64) string {
	v, unit := y, "ms"
	switch {
	case top < 1:
		v, unit = y*1e3, "µs"
	case top >= 1e3:
		v, unit = y/1e3, "s"
	}
	v = math.Round(v*1e6) / 1e6
	return strconv.FormatFloat(v, 'f', -1, 64) + unit
}

func ninesLabel(x int) string {
	switch x {
	case 0:
		return "0%"
	case 1:
		return "90%"
	case 2:
		return "99%"
	}
	return "99." + strings.Repeat("9", x-2) + "%"
}

// niceStep is a 1, 2 or 5 times a power of ten that cuts [0, hi] into at
// most about n parts.
func niceStep(hi float64, n int) float64 {
	if hi <= 0 {
		return 1
	}
	raw := hi / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

func (p *plot) px(x, y float64) (float64, float64) {
	w := float64(plotW - marginL - marginR)
	h := float64(plotH - marginT - marginB)
	return float64(marginL) + x/p.xMax*w, float64(plotH-marginB) - y/p.yMax*h
}

// WritePlot writes the report's latency plot to path as SVG. (A PNG
// needed a rasterizer and a pixel font of our own; any browser shows the
// SVG, and rsvg-convert or inkscape turn it into PNG.)
func (rep *Report) WritePlot(path string) error {
	if err := PlotPath(path); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := rep.WriteSVG(&buf); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// PlotPath checks that path names a file WritePlot can write.
func PlotPath(path string) error {
	if strings.ToLower(filepath.Ext(path)) != ".svg" {
		return fmt.Errorf("plot %s: the file name must end in .svg (the plot is SVG only: "+
			"rsvg-convert -o plot.png plot.svg makes a PNG of it)", path)
	}
	return nil
}

// WriteSVG writes the latency percentile plot as SVG.
func (rep *Report) WriteSVG(w io.Writer) error {
	p := newPlot(rep)
	var b strings.Builder
	esc := func(s string) string {
		var e strings.Builder
		xml.EscapeText(&e, []byte(s))
		return e.String()
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		plotW, plotH, plotW, plotH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", plotW, plotH)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15">%s</text>`+"\n", marginL, esc(p.title))
	for _, t := range p.xTicks {
		x, y0 := p.px(t.at, 0)
		_, y1 := p.px(t.at, p.yMax)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x, y0, x, y1)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, y0+18, esc(t.label))
	}
	for _, t := range p.yTicks {
		x0, y := p.px(0, t.at)
		x1, _ := p.px(p.xMax, t.at)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x0, y, x1, y)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-6, y+4, esc(t.label))
	}
	x0, y0 := p.px(0, 0)
	x1, y1 := p.px(p.xMax, p.yMax)
	fmt.Fprintf(&b, `<path d="M%.1f %.1fV%.1fH%.1f" fill="none" stroke="black"/>`+"\n", x0, y1, y0, x1)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", (x0+x1)/2, plotH-12, esc(p.xLabel))
	fmt.Fprintf(&b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (y0+y1)/2, esc(p.yLabel))
	for i, s := range p.series {
		c := palette[i%len(palette)]
		col := fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B)
		var pts strings.Builder
		for _, pt := range s.pts {
			x, y := p.px(pt[0], pt[1])
			fmt.Fprintf(&pts, "%.1f,%.1f ", x, y)
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.TrimSpace(pts.String()), col)
		ly := float64(marginT) + 10 + 18*float64(i)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3"/>`+"\n", x0+14, ly, x0+34, ly, col)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", x0+40, ly+4, esc(s.name))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
