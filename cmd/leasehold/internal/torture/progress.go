package torture

import (
	"context"
	"fmt"
	"strings"
	"time"
)

const barWidth = 30

// progress shows how far the run is until ctx ends: a bar redrawn on a
// terminal (Progress), or a plain line every 10s (Log).
func (r *run) progress(ctx context.Context) {
	if r.cfg.Progress == nil && r.cfg.Log == nil {
		return
	}
	every := 10 * time.Second
	if r.cfg.Progress != nil {
		every = 250 * time.Millisecond
		defer fmt.Fprint(r.cfg.Progress, "\r\033[K")
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		elapsed := time.Duration(r.rec.now())
		frac := min(elapsed.Seconds()/r.cfg.Duration.Seconds(), 1)
		faults := len(r.rec.records().faults)
		status := fmt.Sprintf("%.0fs/%v  %d operations  %d faults", elapsed.Seconds(), r.cfg.Duration, r.rec.count(), faults)
		if r.cfg.Progress != nil {
			full := int(frac * barWidth)
			fmt.Fprintf(r.cfg.Progress, "\r\033[K[%s%s] %3.0f%%  %s", strings.Repeat("=", full), strings.Repeat(" ", barWidth-full),
				100*frac, status)
		} else {
			r.logf("%s", status)
		}
	}
}
