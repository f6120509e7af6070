package fsm

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// A Join is recognised as a retry by its member and secret. A retry answers
// the first session; the same member and secret with another TTL or other
// metadata is another request, refused with CodeInvalid (before, it was
// answered with the first session as if it were the same, its TTL and
// metadata silently not the ones asked for).
func TestGroupJoinRetryMustBeTheSameJoin(t *testing.T) {
	h := newHarness(t)
	h.one(&GroupCreate{Group: "g", Partitions: 2})
	first := join("g", "a")
	first.Metadata = map[string]string{"host": "x"}
	r := h.one(first)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	again := join("g", "a")
	again.Metadata = map[string]string{"host": "x"}
	if r2 := h.one(again); r2.Err != nil || !r2.Dup || r2.Lease.ID != r.Lease.ID {
		t.Fatalf("a retried join: %+v, want the first session", r2)
	}
	longer := join("g", "a")
	longer.Metadata, longer.TTL = map[string]string{"host": "x"}, time.Minute
	other := join("g", "a")
	other.Metadata = map[string]string{"host": "y"}
	for name, c := range map[string]*GroupJoin{"another ttl": longer, "other metadata": other} {
		if r := h.one(c); leasehold.CodeOf(r.Err) != leasehold.CodeInvalid || r.Lease != nil {
			t.Fatalf("%s under the first join's secret: %+v, want invalid", name, r)
		}
	}
}
