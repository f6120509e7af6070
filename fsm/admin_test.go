package fsm

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

func TestForceRelease(t *testing.T) {
	s, ix := kvTestState()
	l := grantLease(t, s, ix, "a", "r")
	waiter := applyOne(s, ix, &Acquire{RequestID: "w", Resources: []string{"r"}, TTL: time.Second, Wait: time.Minute, SecretHash: sha256.Sum256([]byte("w"))})
	if !waiter.Queued {
		t.Fatal("waiter not queued")
	}
	// A stale lease id is refused and nothing changes.
	r := applyOne(s, ix, &ForceRelease{Resource: "r", LeaseID: l.ID + 1, Actor: "alice", Reason: "stuck"})
	if !errors.Is(r.Err, leasehold.ErrNotHolder) || !strings.Contains(r.Err.Error(), "look again") {
		t.Fatalf("stale lease id: %v", r.Err)
	}
	if h, _ := s.Holder("r"); h.ID != l.ID {
		t.Fatal("a refused forced release changed the holder")
	}
	for _, bad := range []*ForceRelease{
		{Resource: "r", LeaseID: l.ID, Actor: "alice"},
		{Resource: "r", LeaseID: l.ID, Reason: "no actor"},
		{Resource: "", LeaseID: l.ID, Actor: "alice", Reason: "x"},
	} {
		if r := applyOne(s, ix, bad); !errors.Is(r.Err, leasehold.ErrInvalid) {
			t.Fatalf("%+v: %v, want invalid", bad, r.Err)
		}
	}
	r = applyOne(s, ix, &ForceRelease{Resource: "r", LeaseID: l.ID, Actor: "alice", Reason: "holder host is gone"})
	if r.Err != nil || r.Lease.ID != l.ID {
		t.Fatalf("forced release: %+v", r)
	}
	// The waiter is granted with a larger token; the old token is refused.
	h, ok := s.Holder("r")
	if !ok || h.Token <= l.Token {
		t.Fatalf("after forced release holder %+v", h)
	}
	if err := s.CheckFence("r", l.Token); !errors.Is(err, leasehold.ErrStaleToken) {
		t.Fatalf("ex-holder's fence: %v", err)
	}
	audit := s.Audit(time.Time{}, 10)
	if len(audit) != 1 {
		t.Fatalf("audit = %+v", audit)
	}
	a := audit[0]
	if a.Actor != "alice" || a.Reason != "holder host is gone" || a.Resource != "r" || a.LeaseID != l.ID || a.Token != l.Token || a.Action != "force-release" {
		t.Fatalf("audit record %+v", a)
	}
	rs, err := Restore(s.Snapshot(), DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := rs.Audit(time.Time{}, 10); len(got) != 1 || got[0] != a {
		t.Fatalf("restored audit %+v", got)
	}
	if got := s.Audit(a.Time.Add(time.Nanosecond), 10); len(got) != 0 {
		t.Fatalf("audit since after the record: %+v", got)
	}
}

func TestLimits(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxWaitersPerResource = 2
	cfg.MaxLeasesPerOwner = 2
	s := New(cfg, nil)
	ix := uint64(0)
	acq := func(id, owner string, wait time.Duration, res ...string) Result {
		return applyOne(s, &ix, &Acquire{RequestID: id, Owner: owner, Resources: res, TTL: time.Second, Wait: wait})
	}
	acq("h1", "o", 0, "a")
	acq("h2", "o", 0, "b")
	if r := acq("h3", "o", 0, "c"); !errors.Is(r.Err, leasehold.ErrLimit) || !strings.Contains(r.Err.Error(), "max_leases_per_owner") {
		t.Fatalf("third lease of one owner: %v", r.Err)
	}
	acq("w1", "x", time.Minute, "a")
	acq("w2", "y", time.Minute, "a")
	if r := acq("w3", "z", time.Minute, "a"); !errors.Is(r.Err, leasehold.ErrLimit) || !strings.Contains(r.Err.Error(), "max_waiters_per_resource") {
		t.Fatalf("third waiter: %v", r.Err)
	}
	if r := acq("c", "p", 0, "c"); r.Lease == nil {
		t.Fatalf("another owner: %v", r.Err)
	}
}
