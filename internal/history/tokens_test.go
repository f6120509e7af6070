package history

import "testing"

// The checks must be able to fail: each is fed a history with one known
// violation.

func TestTokensReusedCaught(t *testing.T) {
	for _, tc := range []struct {
		name   string
		grants []Grant
		want   int
	}{
		{"increasing", []Grant{{Resource: "a", Token: 5}, {Resource: "a", Token: 9}, {Resource: "b", Token: 7}}, 0},
		{"same token twice", []Grant{{Resource: "a", Token: 5}, {Resource: "b", Token: 5}}, 1},
		{"lower on the same resource", []Grant{{Resource: "a", Token: 9}, {Resource: "a", Token: 7}}, 1},
		{"concurrent resources out of order", []Grant{{Resource: "a", Token: 9}, {Resource: "b", Token: 7}}, 0},
		{"not above an earlier phase", []Grant{{Resource: "a", Token: 9}, {Resource: "b", Token: 7, Phase: 1}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := TokensReused(tc.grants); len(got) != tc.want {
				t.Errorf("TokensReused = %v, want %d", got, tc.want)
			}
		})
	}
}

func TestStaleWritesCaught(t *testing.T) {
	grants := []Grant{{Resource: "a", Token: 5}, {Resource: "a", Token: 9, Op: 2}}
	writes := []Write{
		{Key: "k1", Resource: "a", Token: 5, Version: 7},         // before the next grant: fine
		{Key: "k2", Resource: "a", Token: 9, Version: 12},        // the current holder: fine
		{Key: "k3", Resource: "a", Token: 5, Version: 11, Op: 4}, // after token 9 was granted: stale
		{Key: "k4", Version: 13},                                 // not fenced
	}
	got := StaleWrites(grants, writes)
	if len(got) != 1 || len(got[0].Ops) != 2 || got[0].Ops[0] != 2 || got[0].Ops[1] != 4 {
		t.Errorf("StaleWrites = %v, want the write of k3 after grant 9 (ops 2 and 4)", got)
	}
}

// After a leader change tokens run ahead of the log's indexes (the token
// floor): a stale write's version is then below the newer token, and only
// its send time shows it came after the newer grant.
func TestStaleWritesCaughtAfterTokensWereRaised(t *testing.T) {
	grants := []Grant{{Resource: "a", Token: 5, At: 100}, {Resource: "a", Token: 1030, Op: 2, At: 1000}}
	writes := []Write{
		{Key: "k1", Resource: "a", Token: 5, Version: 20, Sent: 500},         // before the next grant: fine
		{Key: "k2", Resource: "a", Token: 5, Version: 40, Sent: 2000, Op: 4}, // after it: stale
		{Key: "k3", Resource: "a", Token: 5, Version: 41},                    // sent by another process: unknown
	}
	got := StaleWrites(grants, writes)
	if len(got) != 1 || len(got[0].Ops) != 2 || got[0].Ops[0] != 2 || got[0].Ops[1] != 4 {
		t.Errorf("StaleWrites = %v, want the write of k2 sent after grant 1030 (ops 2 and 4)", got)
	}
}
