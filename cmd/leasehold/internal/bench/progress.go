package bench

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
)

const barWidth = 30

// showProgress redraws a one-line progress bar on out (a terminal) until the
// measurement ends, then clears it.
func showProgress(out io.Writer, r *runner, w workload) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	defer fmt.Fprint(out, "\r\033[K")
	start := time.Now()
	var lastN int64
	lastT := time.Now()
	for {
		select {
		case <-t.C:
		case <-r.stopped:
			return
		case <-r.opCtx.Done():
			return
		}
		now := time.Now()
		n := r.measuredCount()
		cur := float64(n-lastN) / now.Sub(lastT).Seconds()
		lastN, lastT = n, now
		fmt.Fprint(out, "\r\033[K"+progressLine(r, w, n, cur, now.Sub(start)))
	}
}

func progressLine(r *runner, w workload, n int64, cur float64, elapsed time.Duration) string {
	switch r.phase.Load() {
	case phaseSetup:
		return fmt.Sprintf("setup: %s (%.0fs)", w.progress(), elapsed.Seconds())
	case phaseWarmup:
		return fmt.Sprintf("warming up for %s ...", r.cfg.Warmup)
	case phaseMeasure:
		frac, of := 0.0, ""
		win := r.window()
		if r.cfg.Ops > 0 {
			frac = float64(n) / float64(r.cfg.Ops)
			of = fmt.Sprintf("%s/%s %s", humanize.Comma(n), humanize.Comma(r.cfg.Ops), w.unit())
		}
		if r.cfg.Duration > 0 {
			if f := win.Seconds() / r.cfg.Duration.Seconds(); f > frac {
				frac = f
			}
			if of == "" {
				of = fmt.Sprintf("%s %s", humanize.Comma(n), w.unit())
			}
			of += fmt.Sprintf(", %.1fs/%s", win.Seconds(), r.cfg.Duration)
		}
		frac = min(max(frac, 0), 1)
		full := int(frac * barWidth)
		return fmt.Sprintf("[%s%s] %3.0f%%  %s  %s/s", strings.Repeat("=", full), strings.Repeat(" ", barWidth-full),
			100*frac, of, commasF(cur))
	}
	return ""
}
