package faults

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// partitionRow is one scenario's line of the partition table: the
// partition checks beside the standard counters.
type partitionRow struct {
	scenario string
	partitionCounts
	acked, lostEverywhere int
}

// partitionTable is the scenarios × figures table, as the README shows it.
func partitionTable(rows []partitionRow) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tholds\tacked writes\texclusion violations\ttoken-order violations\tacked lost (any node)\tstale writes accepted\tcut-off side answered\tfail-closed (max, of leases)")
	for _, r := range rows {
		fc := "–"
		if len(r.failClosed) > 0 {
			fc = fmt.Sprintf("%v (%d)", slices.Max(r.failClosed).Round(time.Millisecond), len(r.failClosed))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", r.scenario, r.holds, r.acked, r.exclusion, r.order,
			r.lostEverywhere, r.stale, r.isolatedOK, fc)
	}
	tw.Flush()
	return b.String()
}
