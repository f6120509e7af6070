package fsm

import "testing"

// A raised floor holds for every later grant, survives a snapshot, and
// never lowers the counter.
func TestRaiseTokensLiftsEveryLaterToken(t *testing.T) {
	h := newHarness(t)
	before := h.mustGrant(acq("a", "r1"))
	h.one(&RaiseTokens{Floor: 5000})
	l := h.mustGrant(acq("b", "r2"))
	if l.Token < 5000 || l.ID != l.Token {
		t.Fatalf("grant after a raise to 5000: token %d id %d (before the raise: %d)", l.Token, l.ID, before.Token)
	}
	h.one(&RaiseTokens{Floor: 10}) // below the counter: no effect
	restored, err := Restore(h.s.Snapshot(), DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	h.s = restored
	if next := h.mustGrant(acq("c", "r3")); next.Token <= l.Token {
		t.Fatalf("token after a lower raise and a snapshot: %d, not above %d", next.Token, l.Token)
	}
}

// A floor beyond what a token may be is refused, so the counter can never
// wrap around to a token already issued (a damaged floor of 2^64-1 made
// the next grant's token 0).
func TestRaiseTokensRefusesAFloorThatWouldWrap(t *testing.T) {
	h := newHarness(t)
	before := h.mustGrant(acq("a", "r1"))
	if r := h.one(&RaiseTokens{Floor: 1<<64 - 1}); r.Err == nil {
		t.Fatal("a floor of 2^64-1 was taken")
	}
	if l := h.mustGrant(acq("b", "r2")); l.Token <= before.Token {
		t.Fatalf("token %d after a refused floor, not above %d", l.Token, before.Token)
	}
	h.one(&RaiseTokens{Floor: MaxTokenFloor})
	if l := h.mustGrant(acq("c", "r3")); l.Token != MaxTokenFloor {
		t.Fatalf("token after the largest floor: %d, want %d", l.Token, uint64(MaxTokenFloor))
	}
	if _, err := Restore(h.s.Snapshot(), DefaultConfig(), nil); err != nil {
		t.Fatalf("a state at the largest token does not restore: %v", err)
	}
}
