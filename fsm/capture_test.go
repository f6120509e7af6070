package fsm

import (
	"bytes"
	"fmt"
	"io"
	"testing"
)

// After a capture is released, what Apply wrote around it is folded back
// a few entries an Apply, not in the first Apply after the release: at a
// million leases, renewals during a Persist of several seconds left
// hundreds of thousands of entries to fold, and folding them at once held
// up that Apply for a quarter of a second. The state reads as a twin that
// was never captured throughout, and a capture taken halfway encodes it
// exactly.
func TestThawIsIncremental(t *testing.T) {
	h, twin := newHarness(t), newHarness(t)
	both := func(cmds ...Command) {
		t.Helper()
		h.apply(cmds...)
		twin.apply(cmds...)
		if !bytes.Equal(h.s.Snapshot(), twin.s.Snapshot()) {
			t.Fatal("the captured state reads otherwise than its twin")
		}
	}
	const n = 200
	leases := make([]uint64, n)
	for i := range leases {
		leases[i] = h.mustGrant(acq(fmt.Sprint("g", i), fmt.Sprint("r", i))).ID
		twin.mustGrant(acq(fmt.Sprint("g", i), fmt.Sprint("r", i)))
	}
	renewal := func(i int) *Renew {
		return &Renew{LeaseID: leases[i], SecretHash: secret(fmt.Sprint("g", i)), Progress: "p"}
	}
	snap := h.s.Capture()
	for i := range leases { // every lease renewed around the capture, one an entry
		both(renewal(i))
	}
	if _, err := snap.WriteTo(io.Discard); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if len(h.s.leases.byID.over) != n {
		t.Fatalf("%d leases written around the capture, want %d", len(h.s.leases.byID.over), n)
	}

	overlays := func() (sum int) {
		for _, m := range h.s.snaps.maps {
			sum += m.overlay()
		}
		return sum
	}
	written := overlays() // the renewed leases, and the dedup records the window dropped meanwhile
	both()                // the first Apply after the release: an Apply wrote about one entry, so it folds 16
	if left, budget := overlays(), thawBudget(written, n); budget != 16 || left != written-budget || !h.s.leases.byID.thawing() {
		t.Fatalf("the first Apply after the release left %d of %d entries to fold, want %d", left, written, written-budget)
	}
	// A write during the fold lands in base and takes its key out of the
	// overlay, and a capture in the middle of it folds the rest first.
	both(renewal(0), &Release{LeaseID: leases[1], SecretHash: secret("g1")})
	if _, left := h.s.leases.byID.over[leases[0]]; left || !h.s.leases.byID.thawing() {
		t.Fatalf("a renewal during the fold: left in the overlay %v, still folding %v", left, h.s.leases.byID.thawing())
	}
	if _, left := h.s.leases.byID.over[leases[1]]; left {
		t.Fatal("a release during the fold left the lease in the overlay")
	}
	want := h.s.Snapshot()
	snap = h.s.Capture()
	if h.s.leases.byID.over == nil || len(h.s.leases.byID.over) != 0 {
		t.Fatalf("a capture during the fold left %d entries to fold", len(h.s.leases.byID.over))
	}
	var got bytes.Buffer
	if _, err := snap.WriteTo(&got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatal("a capture taken during the fold encodes another state")
	}
	both(renewal(2))
	snap.Release()
	for i := 0; h.s.snaps.capture != nil; i++ {
		if i > 2 {
			t.Fatalf("still folding one entry after %d Applies", i)
		}
		both()
	}
	if h.s.leases.byID.over != nil || h.s.leases.byID.frozen || h.s.leases.byID.len() != len(h.s.leases.byID.base) {
		t.Fatalf("after the fold: overlay %d, frozen %v, %d leases in a base of %d",
			len(h.s.leases.byID.over), h.s.leases.byID.frozen, h.s.leases.byID.len(), len(h.s.leases.byID.base))
	}
}

func TestThawBudget(t *testing.T) {
	for _, tc := range []struct{ written, applies, want int }{
		{0, 0, 16}, {1000, 1000, 16}, {100_000, 1000, 200}, {1 << 20, 1, 4096}, {10, 0, 20},
	} {
		if got := thawBudget(tc.written, tc.applies); got != tc.want {
			t.Errorf("thawBudget(%d, %d) = %d, want %d", tc.written, tc.applies, got, tc.want)
		}
	}
}

// While the overlay is folded, a key deleted around the capture stays
// deleted, and one set again is what was set last.
func TestThawKeepsDeletesAndRewrites(t *testing.T) {
	m := newCowMap[string, int]()
	for i := range 10 {
		m.set(fmt.Sprint(i), i)
	}
	m.freeze()
	m.del("1")
	m.set("2", 20)
	m.set("new", 1)
	m.del("new")
	m.set("3", 30)
	m.set("4", 40)
	m.set("5", 50)
	m.unfreeze()
	m.set("3", 31) // during the fold: base, and out of the overlay
	m.del("2")
	if m.thawStep(1) != 1 || !m.thawing() {
		t.Fatalf("a step of one folded something else: overlay %v", m.over)
	}
	for m.thawing() {
		m.thawStep(1)
	}
	got := plainMap(&m)
	want := map[string]int{"0": 0, "3": 31, "4": 40, "5": 50, "6": 6, "7": 7, "8": 8, "9": 9}
	if fmt.Sprint(got) != fmt.Sprint(want) || m.len() != len(want) || len(m.base) != len(want) {
		t.Fatalf("after the fold: %v (len %d, base %d), want %v", got, m.len(), len(m.base), want)
	}
}
