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
