package faults

import (
	"testing"
	"time"
)

// The counters must be able to fail: each is fed a history with one known
// violation.

func TestCountersSeeTokenReuse(t *testing.T) {
	for _, tc := range []struct {
		name   string
		grants []grant
		want   int
	}{
		{"increasing", []grant{{resource: "a", token: 5}, {resource: "a", token: 9}, {resource: "b", token: 7}}, 0},
		{"same token twice", []grant{{resource: "a", token: 5}, {resource: "b", token: 5}}, 1},
		{"lower on the same resource", []grant{{resource: "a", token: 9}, {resource: "a", token: 7}}, 1},
		{"concurrent resources out of order", []grant{{resource: "a", token: 9}, {resource: "b", token: 7}}, 0},
		{"not above an earlier phase", []grant{{resource: "a", token: 9}, {resource: "b", token: 7, phase: 1}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tokensReused(tc.grants, &counts{}); got != tc.want {
				t.Errorf("tokensReused = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestCountersSeeStaleWrites(t *testing.T) {
	grants := []grant{{resource: "a", token: 5}, {resource: "a", token: 9}}
	writes := []write{
		{key: "k1", resource: "a", token: 5, version: 7},  // before the next grant: fine
		{key: "k2", resource: "a", token: 9, version: 12}, // the current holder: fine
		{key: "k3", resource: "a", token: 5, version: 11}, // after token 9 was granted: stale
		{key: "k4", version: 13},                          // not fenced
	}
	if got := staleWrites(grants, writes, &counts{}); got != 1 {
		t.Errorf("staleWrites = %d, want 1", got)
	}
}

// After a leader change tokens run ahead of the log's indexes (the token
// floor): a stale write's version is then below the newer token, and only
// its send time shows it came after the newer grant.
func TestCountersSeeStaleWritesAfterTokensWereRaised(t *testing.T) {
	t0 := time.Now()
	grants := []grant{{resource: "a", token: 5, at: t0}, {resource: "a", token: 1030, at: t0.Add(time.Second)}}
	writes := []write{
		{key: "k1", resource: "a", token: 5, version: 20, sent: t0.Add(500 * time.Millisecond)}, // before the next grant: fine
		{key: "k2", resource: "a", token: 5, version: 40, sent: t0.Add(2 * time.Second)},        // after it: stale
		{key: "k3", resource: "a", token: 5, version: 41},                                       // sent by another process: unknown
	}
	if got := staleWrites(grants, writes, &counts{}); got != 1 {
		t.Errorf("staleWrites = %d, want 1", got)
	}
}
