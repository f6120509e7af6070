package fsm

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// join is a valid GroupJoin of member with a 10s session; its secret is
// derived from the member's name.
func join(group, member string) *GroupJoin {
	return &GroupJoin{Group: group, Member: member, TTL: 10 * time.Second, SecretHash: secret(member)}
}

func ack(group, member string, lease uint64, p uint32, epoch uint64) *GroupRevoked {
	return &GroupRevoked{Group: group, Member: member, LeaseID: lease, SecretHash: secret(member), Partition: p, Epoch: epoch}
}

// owners lists each partition's owner ("" for none, "name*" revoking).
func owners(s *State, group string) []string {
	d, _ := s.Group(group)
	out := make([]string, len(d.Partitions))
	for i, p := range d.Partitions {
		out[i] = p.Owner
		if p.Revoking {
			out[i] += "*"
		}
	}
	return out
}

func TestGroupHandOffWaitsForTheAcknowledgement(t *testing.T) {
	h := newHarness(t)
	if r := h.one(&GroupCreate{Group: "g", Partitions: 4}); r.Err != nil {
		t.Fatal(r.Err)
	}
	a := h.one(join("g", "a"))
	if a.Err != nil || len(a.Group().Assignments) != 4 {
		t.Fatalf("first join: %v %+v", a.Err, a.Group())
	}
	first, _ := h.s.Group("g")
	b := h.one(join("g", "b"))
	if b.Err != nil || len(b.Group().Assignments) != 0 {
		t.Fatalf("second join got partitions before a gave any up: %v %+v", b.Err, b.Group().Assignments)
	}
	if got, want := owners(h.s, "g"), []string{"a", "a", "a*", "a*"}; !slices.Equal(got, want) {
		t.Fatalf("after b joined: %q, want %q", got, want)
	}
	// b gets partition 3 only once a gave it up, with a larger epoch.
	if r := h.one(ack("g", "a", a.Lease.ID, 3, first.Partitions[3].Epoch)); r.Err != nil {
		t.Fatal(r.Err)
	}
	d, _ := h.s.Group("g")
	if d.Partitions[3].Owner != "b" || d.Partitions[3].Epoch <= first.Partitions[3].Epoch {
		t.Fatalf("partition 3 after the ack: %+v (before: epoch %d)", d.Partitions[3], first.Partitions[3].Epoch)
	}
	// A retried acknowledgement is answered alike; a bogus epoch is stale.
	if r := h.one(ack("g", "a", a.Lease.ID, 3, first.Partitions[3].Epoch)); r.Err != nil || !r.Dup {
		t.Fatalf("retried ack: %v", r.Err)
	}
	wantCode(t, "ack of a future epoch", h.one(ack("g", "a", a.Lease.ID, 2, d.Partitions[3].Epoch+100)), leasehold.CodeStaleToken)
	wantCode(t, "ack of a partition not revoked", h.one(ack("g", "a", a.Lease.ID, 0, d.Partitions[0].Epoch)), leasehold.CodeNotHolder)
	wantCode(t, "ack with a wrong secret", h.one(&GroupRevoked{Group: "g", Member: "a", LeaseID: a.Lease.ID,
		SecretHash: secret("x"), Partition: 2, Epoch: d.Partitions[2].Epoch}), leasehold.CodeNotHolder)

	// The revocation of partition 2 lapses: a's session ends, b gets all.
	h.one(&GroupLapse{Group: "g", LeaseID: a.Lease.ID, Partition: 2, Epoch: d.Partitions[2].Epoch})
	if _, ok := h.s.Lease(a.Lease.ID); ok {
		t.Fatal("a's session survived a lapsed revocation")
	}
	if got, want := owners(h.s, "g"), []string{"b", "b", "b", "b"}; !slices.Equal(got, want) {
		t.Fatalf("after a lapsed: %q, want %q", got, want)
	}
	after, _ := h.s.Group("g")
	for p := range after.Partitions {
		if after.Partitions[p].Epoch <= d.Partitions[p].Epoch && p != 3 {
			t.Fatalf("partition %d kept epoch %d after changing owner", p, after.Partitions[p].Epoch)
		}
	}
	if after.Lapsed != 1 {
		t.Fatalf("lapsed = %d, want 1", after.Lapsed)
	}
}

func TestGroupJoinRules(t *testing.T) {
	h := newHarness(t)
	wantCode(t, "join of a missing group", h.one(join("nope", "a")), leasehold.CodeNotFound)
	wantCode(t, "no partitions", h.one(&GroupCreate{Group: "g", Partitions: 0}), leasehold.CodeInvalid)
	wantCode(t, "too many partitions", h.one(&GroupCreate{Group: "g", Partitions: MaxGroupPartitions + 1}), leasehold.CodeInvalid)
	h.one(&GroupCreate{Group: "g", Partitions: 2})
	if r := h.one(&GroupCreate{Group: "g", Partitions: 2}); r.Err != nil || !r.Dup {
		t.Fatalf("a retried create: %v", r.Err)
	}
	wantCode(t, "create with other settings", h.one(&GroupCreate{Group: "g", Partitions: 3}), leasehold.CodeHeld)
	a := h.one(join("g", "a"))
	if r := h.one(join("g", "a")); r.Err != nil || !r.Dup || r.Lease.ID != a.Lease.ID {
		t.Fatalf("a retried join: %v %+v", r.Err, r.Lease)
	}
	other := join("g", "a")
	other.SecretHash = secret("impostor")
	wantCode(t, "a second session of a member", h.one(other), leasehold.CodeHeld)
	bad := join("g", "b")
	bad.TTL = time.Millisecond
	wantCode(t, "a tiny ttl", h.one(bad), leasehold.CodeInvalid)
	wantCode(t, "shrinking", h.one(&GroupGrow{Group: "g", Partitions: 1}), leasehold.CodeNotHolder)
	if r := h.one(&GroupGrow{Group: "g", Partitions: 5}); r.Err != nil || r.Group().Partitions != 5 {
		t.Fatalf("grow: %v", r.Err)
	}
	if got := owners(h.s, "g"); !slices.Equal(got, []string{"a", "a", "a", "a", "a"}) {
		t.Fatalf("the grown partitions were not shared out: %q", got)
	}
	lock := h.mustGrant(acq("l", "res"))
	wantCode(t, "leave with a lock's lease", h.one(&GroupLeave{LeaseID: lock.ID, SecretHash: secret("l")}), leasehold.CodeInvalid)
	if r := h.one(&GroupLeave{RequestID: "bye", LeaseID: a.Lease.ID, SecretHash: secret("a")}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := h.one(&GroupLeave{RequestID: "bye", LeaseID: a.Lease.ID, SecretHash: secret("a")}); r.Err != nil || !r.Dup {
		t.Fatalf("a retried leave: %v", r.Err)
	}
	if got := owners(h.s, "g"); !slices.Equal(got, []string{"", "", "", "", ""}) {
		t.Fatalf("after the last member left: %q", got)
	}
	b := h.one(join("g", "b"))
	wantCode(t, "delete without a reason", h.one(&GroupDelete{Group: "g", Actor: "ops"}), leasehold.CodeInvalid)
	if r := h.one(&GroupDelete{Group: "g", Actor: "ops", Reason: "retired"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if _, ok := h.s.Lease(b.Lease.ID); ok {
		t.Fatal("a member's session survived its group's deletion")
	}
	if got := h.s.audit[len(h.s.audit)-1]; got.Action != "group-delete" || got.Actor != "ops" {
		t.Fatalf("audit: %+v", got)
	}
}

// A snapshot taken with revocations pending restores to a state that
// writes the same bytes and goes on alike.
func TestGroupSnapshotRoundTrip(t *testing.T) {
	h := newHarness(t)
	h.one(&GroupCreate{Group: "g", Partitions: 7, RevokeTimeout: time.Second})
	h.one(&GroupCreate{Group: "single", Partitions: 1}) // the smallest section a group writes
	h.one(join("g", "a"))
	h.one(join("g", "b"))
	snap := h.s.Snapshot()
	r, err := Restore(snap, DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.Snapshot(), snap) {
		t.Fatal("the groups section does not round-trip")
	}
	if got, want := owners(r, "g"), owners(h.s, "g"); !slices.Equal(got, want) {
		t.Fatalf("restored owners %q, want %q", got, want)
	}
}

// A member that leaves while its partitions are being revoked to others
// hands them straight to those others: only its own share moves (found
// by TestGroupProperties: the hand-off used to forget the next in line
// and share everything out anew).
func TestGroupLeaveOfARevokingOwnerKeepsTheAssignment(t *testing.T) {
	h := newHarness(t)
	h.one(&GroupCreate{Group: "g", Partitions: 3})
	m0 := h.one(join("g", "m0"))
	h.one(join("g", "m1"))
	h.one(join("g", "m2"))
	if got, want := targets(h.s), []string{"m0", "m2", "m1"}; !slices.Equal(got, want) {
		t.Fatalf("targets before the leave: %q, want %q", got, want)
	}
	h.one(&GroupLeave{LeaseID: m0.Lease.ID, SecretHash: secret("m0")})
	if got, want := owners(h.s, "g"), []string{"m1", "m2", "m1"}; !slices.Equal(got, want) {
		t.Fatalf("owners after m0 left: %q, want %q (only m0's own partition moves)", got, want)
	}
}
