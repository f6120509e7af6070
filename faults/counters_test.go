package faults

import "testing"

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
