package faults

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/leasehold/leasehold/client"
)

// expect says which counters a scenario allows above 0. Only lostAllowed
// exists: a single node whose log lost acknowledged entries cannot have
// them back (the operator keeps the good prefix), but even there no token
// may be reused and no stale or unauthorized operation accepted.
type expect struct {
	lostAllowed bool
}

// row is one scenario's line of the report.
type row struct {
	scenario string
	counts
	expect
	problem string // the scenario could not finish (a node never came back...), or ""
}

var (
	reportMu sync.Mutex
	report   []row
)

// finish counts h (reading back through c, if the service can answer),
// adds the scenario's row to the report, logs it, and fails t naming the
// scenario and every counter over its expectation. problem is an error
// that stopped the scenario before its checks, or nil.
func finish(t testing.TB, scenario string, h *history, c *client.Client, e expect, problem error) {
	t.Helper()
	r := row{scenario: scenario, expect: e}
	if problem != nil {
		r.problem = problem.Error()
	}
	// A scenario that could not finish may have left no node that answers:
	// give reading back less time then.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	if problem != nil {
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	}
	defer cancel()
	n, err := h.count(ctx, c)
	r.counts = n
	if err != nil && r.problem == "" {
		r.problem = "could not read the state back: " + err.Error()
	}
	if c == nil && r.problem == "" {
		r.problem = "no node to read the state back from"
	}
	reportMu.Lock()
	report = append(report, r)
	reportMu.Unlock()
	t.Logf("%s: acked writes %d, lost %d (read back: %v), tokens reused %d, stale accepted %d, unauthorized accepted %d",
		scenario, r.acked, r.lost, r.readBack, r.tokensReused, r.stale, r.unauthorized)
	var bad []string
	if r.lost > 0 && !e.lostAllowed {
		bad = append(bad, fmt.Sprintf("acknowledged writes lost = %d", r.lost))
	}
	if r.tokensReused > 0 {
		bad = append(bad, fmt.Sprintf("tokens reused = %d", r.tokensReused))
	}
	if r.stale > 0 {
		bad = append(bad, fmt.Sprintf("stale writes accepted = %d", r.stale))
	}
	if r.unauthorized > 0 {
		bad = append(bad, fmt.Sprintf("unauthorized operations accepted = %d", r.unauthorized))
	}
	if r.problem != "" {
		bad = append(bad, "scenario did not complete: "+r.problem)
	}
	if len(bad) > 0 {
		t.Errorf("scenario %s: %s\n  %s", scenario, strings.Join(bad, "; "), strings.Join(r.examples, "\n  "))
	}
}

// printReport writes the table of every scenario run.
func printReport(w io.Writer) {
	reportMu.Lock()
	defer reportMu.Unlock()
	if len(report) == 0 {
		return
	}
	mode := "short"
	if full {
		mode = "full"
	}
	fmt.Fprintf(w, "\nleasehold fault suite (%s): every counter must be 0 (lost: unless marked allowed)\n", mode)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tacked writes\tlost\ttokens reused\tstale accepted\tunauthorized accepted\tresult")
	for _, r := range report {
		lost := fmt.Sprint(r.lost)
		if !r.readBack {
			lost = "?"
		}
		if r.lostAllowed {
			lost += " (allowed)"
		}
		result := "ok"
		if r.problem != "" {
			result = "DID NOT COMPLETE: " + firstLine(r.problem)
		} else if (r.lost > 0 && !r.lostAllowed) || r.tokensReused > 0 || r.stale > 0 || r.unauthorized > 0 {
			result = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\n", r.scenario, r.acked, lost, r.tokensReused, r.stale, r.unauthorized, result)
	}
	tw.Flush()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}
