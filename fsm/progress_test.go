package fsm

import (
	"testing"
	"time"
)

// TestProgressAt: a renewal with a note stamps ProgressAt with the entry's
// time; one without a note keeps the note and its time.
func TestProgressAt(t *testing.T) {
	h := newHarness(t)
	l := h.mustGrant(acq("a", "x"))
	if got, _ := h.s.Lease(l.ID); !got.ProgressAt.IsZero() {
		t.Fatalf("ProgressAt = %v before any note", got.ProgressAt)
	}
	h.one(&Renew{LeaseID: l.ID, SecretHash: secret("a"), Progress: "step 1"})
	noted := time.Unix(0, h.now).UTC()
	h.one(&Renew{LeaseID: l.ID, SecretHash: secret("a")})
	got, _ := h.s.Lease(l.ID)
	if got.Progress != "step 1" || !got.ProgressAt.Equal(noted) || !got.RenewedAt.After(noted) {
		t.Fatalf("after a note and a renewal without one: progress %q at %v, renewed %v; want the note at %v",
			got.Progress, got.ProgressAt, got.RenewedAt, noted)
	}
	// A refused renewal changes nothing.
	h.one(&Renew{LeaseID: l.ID, SecretHash: secret("mallory"), Progress: "evil"})
	if again, _ := h.s.Lease(l.ID); again.Progress != "step 1" || !again.ProgressAt.Equal(noted) {
		t.Fatalf("a refused renewal changed the note: %q at %v", again.Progress, again.ProgressAt)
	}
	r, err := Restore(h.s.Snapshot(), DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if back, _ := r.Lease(l.ID); !back.ProgressAt.Equal(noted) {
		t.Fatalf("ProgressAt after a snapshot = %v, want %v", back.ProgressAt, noted)
	}
}

// TestRestoreVersion1: a snapshot written before leases carried ProgressAt
// still restores, with ProgressAt unknown (zero).
