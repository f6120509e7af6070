package fsm

import (
	"fmt"
	"slices"
	"sort"
	"testing"

	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/api/leasehold"
)

// electionsByWalk is what ElectionsPage answered before the elections
// had an index: a walk over every held resource, and the queues.
func electionsByWalk(s *State) []string {
	names := map[string]bool{}
	for r, id := range s.leases.holders.all() {
		if s.leases.byID.at(id).election() {
			names[r] = true
		}
	}
	for r, q := range s.leases.lines {
		if q[0].campaign() {
			names[r] = true
		}
	}
	out := make([]string, 0, len(names))
	for r := range names {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// TestElectionIndexMatchesTheWalk: through campaigns, plain locks on the
// same names, resignations, expiries and a snapshot round trip, the
// elections listed from the index are those a walk over every lease
// finds.
func TestElectionIndexMatchesTheWalk(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h := newHarness(t)
		var held []*leasehold.Lease
		names := []string{"e0", "e1", "e2"}
		for i := range rapid.IntRange(1, 40).Draw(rt, "steps") {
			id := fmt.Sprintf("c%d", i)
			name := rapid.SampledFrom(names).Draw(rt, "name")
			switch rapid.IntRange(0, 4).Draw(rt, "op") {
			case 0, 1: // campaign
				if r := h.one(campaign(id, name, "v")); r.Lease != nil {
					held = append(held, r.Lease)
				}
			case 2: // a plain lock on the same name
				if r := h.one(acq(id, name)); r.Lease != nil {
					held = append(held, r.Lease)
				}
			case 3: // the end of a held lease, by expiry (campaigns queued behind it may win)
				if len(held) > 0 {
					k := rapid.IntRange(0, len(held)-1).Draw(rt, "which")
					h.one(&Expire{LeaseID: held[k].ID})
				}
			case 4: // restart from a snapshot
				s2, err := Restore(h.s.Snapshot(), DefaultConfig(), nil)
				if err != nil {
					rt.Fatal(err)
				}
				h.s = s2
			}
			// The leases held now (queued campaigns may have won).
			held = held[:0]
			for _, l := range h.s.leases.byID.all() {
				v := l.view()
				held = append(held, &v)
			}
			var got []string
			for _, e := range h.s.Elections("") {
				got = append(got, e.Name)
			}
			if want := electionsByWalk(h.s); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				rt.Fatalf("step %d: elections %v, the walk finds %v", i, got, want)
			}
			// The index holds the elections with a leader, and only them.
			var leaders []string
			for r, id := range h.s.leases.holders.all() {
				if h.s.leases.byID.at(id).election() {
					leaders = append(leaders, r)
				}
			}
			var indexed []string
			for r := range h.s.elections.led {
				indexed = append(indexed, r)
			}
			sort.Strings(leaders)
			sort.Strings(indexed)
			if !slices.Equal(leaders, indexed) {
				rt.Fatalf("step %d: the index holds %v, the leaders are %v", i, indexed, leaders)
			}
		}
	})
}

// BenchmarkElections100k lists the elections of a state holding 100,000
// plain leases and two elections, as a metrics scrape does while Apply
// waits: with the index it reads the two, not every lease.
func BenchmarkElections100k(b *testing.B) {
	h := newHarness(b)
	for i := range 100_000 {
		h.mustGrant(acq(fmt.Sprintf("l%d", i), fmt.Sprintf("r%d", i)))
	}
	h.one(campaign("e1", "e1", "v"))
	h.one(campaign("e2", "e2", "v"))
	b.ResetTimer()
	for b.Loop() {
		if n := len(h.s.Elections("")); n != 2 {
			b.Fatalf("%d elections, want 2", n)
		}
	}
}
