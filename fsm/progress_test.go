package fsm

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold"
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
func TestRestoreVersion1(t *testing.T) {
	l := leasehold.Lease{ID: 5, Token: 5, Resources: []string{"x"}, Owner: "o", Operation: "op", TTL: time.Second,
		AcquiredAt: time.Unix(0, t0).UTC(), RenewedAt: time.Unix(0, t0+int64(time.Second)).UTC(), RenewCount: 1, Progress: "p"}
	e := encoder{}
	e.b = append(e.b, snapMagic...)
	e.byte1(1)
	e.uvarint(7) // last index
	e.uvarint(5) // last token
	e.uvarint(0) // next arrival
	e.uvarint(1) // one lease, in the version 1 layout
	e.uvarint(l.ID)
	e.uvarint(l.Token)
	e.strs(l.Resources)
	e.str(l.Owner)
	e.str(l.Operation)
	e.varint(int64(l.TTL))
	e.varint(int64(l.LockDelay))
	e.varint(int64(l.MaxHold))
	e.strMap(l.Metadata)
	e.varint(timeNanos(l.AcquiredAt))
	e.varint(timeNanos(l.RenewedAt))
	e.uvarint(l.RenewCount)
	e.str(l.Progress)
	e.hash(secret("a"))
	e.varint(0)    // held for
	e.str("req-a") // request id
	e.bool(false)  // claimed
	e.uvarint(0)   // lock-delays
	e.uvarint(0)   // waiters
	e.uvarint(0)   // keys
	e.uvarint(0)   // audit records
	e.uvarint(0)   // dedup records
	s, err := Restore(e.b, DefaultConfig(), nil)
	if err != nil {
		t.Fatalf("restore a version 1 snapshot: %v", err)
	}
	got, ok := s.Lease(5)
	if !ok || got.Progress != "p" || !got.ProgressAt.IsZero() || got.RenewCount != 1 {
		t.Fatalf("lease from a version 1 snapshot: %+v (found %v)", got, ok)
	}
	// It is written back in the current version and restores again.
	if snap := s.Snapshot(); snap[len(snapMagic)] != snapVersion {
		t.Fatalf("snapshot written in version %d", snap[len(snapMagic)])
	} else if _, err := Restore(snap, DefaultConfig(), nil); err != nil {
		t.Fatal(err)
	}
}
