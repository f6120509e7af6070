package fsm

import (
	"slices"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/api/leasehold"
)

// bput is a one-op Txn that writes key bound to lease l (proven by the
// secret named name).
func bput(key, val string, l *leasehold.Lease, name string) *Txn {
	return &Txn{Then: []TxnOp{{Key: key, Value: []byte(val), Lease: &LeaseProof{ID: l.ID, SecretHash: secret(name)}}}}
}

// A bound key is deleted in the entry that ends its lease, whatever ends
// it, and a watcher sees the end and the deletion at the same index.
func TestBoundKeysEndWithTheirLease(t *testing.T) {
	ends := map[string]func(h *harness, l *leasehold.Lease) Command{
		"release": func(_ *harness, l *leasehold.Lease) Command { return release(l, "g") },
		"expire":  func(_ *harness, l *leasehold.Lease) Command { return &Expire{LeaseID: l.ID} },
		"force": func(_ *harness, l *leasehold.Lease) Command {
			return &ForceRelease{Resource: "r", LeaseID: l.ID, Actor: "op", Reason: "test"}
		},
		"canceled grant": func(_ *harness, l *leasehold.Lease) Command { return &Cancel{Key: keyOf("g")} },
	}
	for name, end := range ends {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			evs := &eventLog{}
			h.s.SetObserver(evs)
			l := h.mustGrant(acq("g", "r"))
			for _, k := range []string{"svc/b", "svc/a"} {
				if r := h.one(bput(k, "up", l, "g")); r.Err != nil || !r.Txn().Succeeded {
					t.Fatalf("bound put %s: %+v %v", k, r.Txn(), r.Err)
				}
			}
			if it, _ := h.s.Get("svc/a"); it.Lease != l.ID {
				t.Fatalf("svc/a bound to %d, want %d", it.Lease, l.ID)
			}
			evs.lines()
			h.one(end(h, l))
			if _, ok := h.s.Get("svc/a"); ok {
				t.Fatal("svc/a outlived its lease")
			}
			if _, ok := h.s.Get("svc/b"); ok || len(h.s.kv.bound) != 0 || h.s.kv.bytes != 0 {
				t.Fatalf("svc/b or the index outlived the lease: bound %v, kvBytes %d", h.s.kv.bound, h.s.kv.bytes)
			}
			got := evs.ev
			if len(got) != 3 || got[1].Kind != EventDeleted || got[1].Key != "svc/a" || got[2].Key != "svc/b" ||
				got[1].Index != got[0].Index || got[2].Index != got[0].Index || got[1].LeaseID != l.ID {
				t.Fatalf("events of the end: %+v, want the end then both deletions at its index", got)
			}
		})
	}
}

func TestBoundKeyRebindUnbindAndRefusals(t *testing.T) {
	h := newHarness(t)
	l1 := h.mustGrant(acq("g1", "r1"))
	l2 := h.mustGrant(acq("g2", "r2"))
	wantCode(t, "bind", h.one(bput("k", "1", l1, "g1")), leasehold.CodeUnknown)
	// Writing it bound to another lease rebinds it (the last writer owns it).
	wantCode(t, "rebind", h.one(bput("k", "2", l2, "g2")), leasehold.CodeUnknown)
	h.one(release(l1, "g1"))
	if it, ok := h.s.Get("k"); !ok || string(it.Value) != "2" || it.Lease != l2.ID {
		t.Fatalf("after the first lease ended: %+v %v, want k=2 bound to %d", it, ok, l2.ID)
	}
	// A plain write unbinds it: it survives its lease.
	wantCode(t, "plain put", h.one(&Put{Key: "k", Value: []byte("3")}), leasehold.CodeUnknown)
	h.one(release(l2, "g2"))
	if it, ok := h.s.Get("k"); !ok || it.Lease != 0 || len(h.s.kv.bound) != 0 {
		t.Fatalf("after a plain put and the release: %+v %v, bound %v", it, ok, h.s.kv.bound)
	}

	l3 := h.mustGrant(acq("g3", "r3"))
	wantCode(t, "bind j", h.one(bput("j", "1", l3, "g3")), leasehold.CodeUnknown)
	wantCode(t, "delete j", h.one(&Delete{Key: "j"}), leasehold.CodeUnknown)
	if len(h.s.kv.bound) != 0 {
		t.Fatalf("a deleted key stays in the index: %v", h.s.kv.bound)
	}
	for _, tc := range []struct {
		name string
		c    *Txn
		code leasehold.Code
		msg  string
	}{
		{"wrong secret", bput("x", "1", l3, "not g3"), leasehold.CodeNotHolder, `cannot bind key "x" to lease`},
		{"ended lease", bput("x", "1", l1, "g1"), leasehold.CodeNotFound, "gone"},
		{"lease 0", bput("x", "1", &leasehold.Lease{}, "g1"), leasehold.CodeInvalid, "lease 0"},
		{"bad proof in the branch that does not run", &Txn{Compares: []Compare{{Key: "x", Op: CompareAbsent}},
			Then: []TxnOp{put("x", "1")}, Else: bput("x", "1", l3, "not g3").Then}, leasehold.CodeNotHolder, "secret"},
	} {
		r := h.one(tc.c)
		wantCode(t, tc.name, r, tc.code)
		if !strings.Contains(r.Err.Error(), tc.msg) {
			t.Errorf("%s: %q does not say %q", tc.name, r.Err, tc.msg)
		}
		if _, ok := h.s.Get("x"); ok {
			t.Fatalf("%s: a refused bound put wrote", tc.name)
		}
	}
}

// A snapshot keeps each key's lease; the restored state deletes it when
// the lease ends.
func TestBoundKeysSurviveSnapshot(t *testing.T) {
	h := newHarness(t)
	l := h.mustGrant(acq("g", "r"))
	h.one(bput("a", "1", l, "g"))
	h.one(&Put{Key: "plain", Value: []byte("p")})
	s2, err := Restore(h.s.Snapshot(), DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := s2.BoundKeys(l.ID); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("restored binding: %v", got)
	}
	s2.Apply(h.ix+1, &Batch{Time: h.now, Cmds: []Command{release(l, "g")}})
	if _, ok := s2.Get("a"); ok {
		t.Fatal("the restored bound key outlived its lease")
	}
	if _, ok := s2.Get("plain"); !ok {
		t.Fatal("the plain key went with the lease")
	}
}
