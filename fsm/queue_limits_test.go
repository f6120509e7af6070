package fsm

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// The Nack delay's limit is the vocabulary's (leasehold.MaxQueueDelay),
// which the API edge checks; a Nack in a log written when the state
// machine took up to 12 hours still applies as it did, through its log
// encoding, and one past that is still refused.
func TestLoggedNackPastTheEdgesDelayLimitStillApplies(t *testing.T) {
	q := newQueueRig(t, DefaultConfig(), nil)
	q.ok(&QueueCreate{Queue: "q", Settings: QueueSettings{MaxReceives: 5}})
	q.send("q", "k", "m")
	d := q.receive("q", 1)[0]
	too := &QueueNack{Queue: "q", Seq: d.Sequence, Token: d.Token, Delay: maxLoggedNackDelay + time.Second}
	if r := q.logged(too); leasehold.CodeOf(r.Err) != leasehold.CodeInvalid {
		t.Fatalf("a nack delayed %v: %v, want invalid", too.Delay, r.Err)
	}
	old := &QueueNack{Queue: "q", Seq: d.Sequence, Token: d.Token, Delay: 12 * time.Hour}
	if old.Delay <= leasehold.MaxQueueDelay {
		t.Fatal("the test needs a delay past the edge's limit")
	}
	if r := q.logged(old); r.Err != nil {
		t.Fatalf("a logged nack delayed %v (past the edge's %v): %v, want it applied", old.Delay, leasehold.MaxQueueDelay, r.Err)
	}
	if at, ok := q.s.NextReady("q"); !ok || at.Sub(time.Unix(0, q.now)) != 12*time.Hour {
		t.Fatalf("the nacked message is ready at %v (ok %v), want 12h after the nack", at, ok)
	}
}
