package faults

import (
	"fmt"
	"slices"
	"time"

	hist "github.com/leasehold/leasehold/internal/history"
)

// What the partition scenarios record beside the history of grants and
// acknowledged writes: every lease as its holder saw it, and every call
// with when it was sent and answered. Times are the test's own clock (the
// clients run in the test process, each on its host's network), so holds
// of different clients compare directly.

// hold is one lease as its holder saw it: from the grant's reply
// (start) to the moment it stopped being entitled to act (end: just
// before it sent its release, or its safe deadline, whichever came first;
// for a lease that ended by itself, the deadline it claimed).
type hold struct {
	resource       string
	leaseID, token uint64
	host           string
	start, end     time.Time
	lost           bool      // ended by itself: not released
	doneAt         time.Time // when the client ended it (lost leases)
}

// call is one client call of the workload.
type call struct {
	host           string
	what           string
	sent, returned time.Time
	bound          time.Duration // its context's timeout
	ok             bool
	// resource and token fence a put (resource empty: not a fenced put)
	resource string
	token    uint64
}

// cutOff is a window in which hosts could reach no other host.
type cutOff struct {
	hosts    []string
	from, to time.Time
}

func (w cutOff) has(host string) bool { return slices.Contains(w.hosts, host) }

// partitionCounts are what the partition scenarios add to the standard
// counters.
type partitionCounts struct {
	holds         int
	exclusion     int             // pairs of overlapping holds of one resource
	order         int             // successive holds of a resource whose tokens do not increase
	isolatedOK    int             // calls sent and answered with success inside one cut-off window, on its side
	lateCalls     int             // calls that outlived their bound
	failClosed    []time.Duration // per lease lost on the cut-off side: from the cut to its end
	lateFailClose int             // leases that ended past their deadline, or past the bound after a cut, or not at all
	stale         int             // fenced puts accepted though sent after a newer token's grant was answered
	examples      []string
}

func (c *partitionCounts) example(format string, args ...any) {
	if len(c.examples) < 8 {
		c.examples = append(c.examples, fmt.Sprintf(format, args...))
	}
}

// checkExclusion counts, with history.Exclusion, holds of one resource
// by different leases that overlap, and holds whose tokens do not follow
// real time (a token issued twice, or a hold with a larger token started
// before one with a smaller).
func checkExclusion(holds []hold, n *partitionCounts) {
	if len(holds) == 0 {
		return
	}
	at := historyClock(holds)
	hs := make([]hist.Hold, 0, len(holds))
	for _, h := range holds {
		hs = append(hs, hist.Hold{Owner: fmt.Sprintf("lease %d on %s", h.leaseID, h.host), Resource: h.resource,
			Token: h.token, Lease: h.leaseID, Sent: at(h.start), Ack: at(h.start), End: at(h.end)})
	}
	for _, v := range hist.Exclusion(hs) {
		if v.Check == hist.CheckOverlap {
			n.exclusion++
		} else {
			n.order++
		}
		n.example("%s", v)
	}
}

const clockFmt = "15:04:05.000"

// historyClock turns the test's times into the history's: nanoseconds
// from just before the first grant (never 0, which the history's checks
// read as unknown).
func historyClock(holds []hold) func(time.Time) int64 {
	base := holds[0].start
	for _, h := range holds {
		if h.start.Before(base) {
			base = h.start
		}
	}
	return func(t time.Time) int64 { return t.Sub(base).Nanoseconds() + 1 }
}

// failClosedBound is how long after a cut a lease held on the cut-off
// side may still be held by its client: its safe deadline, counted from
// before the last renewal that got through (sent before the cut), is at
// most TTL × (1 − DriftRatio) − Drift after it (the client's defaults:
// 0.02 and 10ms).
func failClosedBound(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*(1-0.02)) - 10*time.Millisecond
}

// timerSlack is how late a client's deadline timer, and the test's
// goroutine that sees it, may run on two loaded cores.
const timerSlack = 500 * time.Millisecond

// checkCalls counts calls that took longer than their bound (a call
// fails closed within its context's deadline, whatever the network
// does), and leases that ended later than their safe deadline.
func checkCalls(holds []hold, calls []call, n *partitionCounts) {
	for _, c := range calls {
		if took := c.returned.Sub(c.sent); took > c.bound+timerSlack {
			n.lateCalls++
			n.example("late: %s on %s returned after %v, its bound %v", c.what, c.host, took, c.bound)
		}
	}
	for _, h := range holds {
		if h.lost && h.doneAt.Sub(h.end) > timerSlack {
			n.lateFailClose++
			n.example("late: lease %d on %s (%s) ended %v after its safe deadline", h.leaseID, h.host, h.resource, h.doneAt.Sub(h.end))
		}
	}
}

// checkCutOff counts what the cut-off side was wrongly answered: a call
// sent inside a window and answered with success before the window
// closed (nothing commits without the majority); and measures, for every
// lease held there when the cut came and lost in it, how long after the
// cut it ended, counting those past failClosedBound.
func checkCutOff(holds []hold, calls []call, windows []cutOff, ttl time.Duration, n *partitionCounts) {
	for _, w := range windows {
		for _, c := range calls {
			if c.ok && w.has(c.host) && !c.sent.Before(w.from) && c.returned.Before(w.to) {
				n.isolatedOK++
				n.example("cut-off side answered: %s on %s sent %s, succeeded %s, inside the cut %s-%s",
					c.what, c.host, c.sent.Format(clockFmt), c.returned.Format(clockFmt), w.from.Format(clockFmt), w.to.Format(clockFmt))
			}
		}
		for _, h := range holds {
			if !w.has(h.host) || !h.lost || !h.start.Before(w.from) || h.doneAt.Before(w.from) || !h.doneAt.Before(w.to) {
				continue
			}
			took := h.doneAt.Sub(w.from)
			n.failClosed = append(n.failClosed, took)
			if took > failClosedBound(ttl)+timerSlack {
				n.lateFailClose++
				n.example("fail-closed late: lease %d on %s (%s) ended %v after the cut (bound %v)",
					h.leaseID, h.host, h.resource, took, failClosedBound(ttl))
			}
		}
	}
}

// checkStale counts fenced puts accepted although they were sent after
// the grant of a larger token on their resource was answered: the fence
// takes only the current holder's token, and tokens only grow, so such a
// put must be refused. It is history.StaleWrites' send-time rule on the
// test's clock (the writes' versions are not recorded: after a leader
// change the index rule goes blind anyway, see StaleWrites).
func checkStale(holds []hold, calls []call, n *partitionCounts) {
	if len(holds) == 0 {
		return
	}
	at := historyClock(holds)
	grants := make([]hist.Grant, 0, len(holds))
	for _, h := range holds {
		grants = append(grants, hist.Grant{Resource: h.resource, Lease: h.leaseID, Token: h.token, At: at(h.start)})
	}
	var writes []hist.Write
	for _, c := range calls {
		if c.ok && c.resource != "" {
			writes = append(writes, hist.Write{Key: fmt.Sprintf("%s on %s sent %s", c.what, c.host, c.sent.Format(clockFmt)),
				Resource: c.resource, Token: c.token, Sent: at(c.sent)})
		}
	}
	for _, v := range hist.StaleWrites(grants, writes) {
		n.stale++
		n.example("stale write accepted: %s", v)
	}
}
