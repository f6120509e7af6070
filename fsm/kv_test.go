package fsm

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/api/leasehold"
)

func kvTestState() (*State, *uint64) {
	ix := uint64(0)
	return New(DefaultConfig(), nil), &ix
}

func applyOne(s *State, ix *uint64, c Command) Result {
	*ix++
	return s.Apply(*ix, &Batch{Time: int64(*ix) * int64(time.Millisecond), Cmds: []Command{c}})[0]
}

func grantLease(t interface{ Fatalf(string, ...any) }, s *State, ix *uint64, id, res string) *leasehold.Lease {
	r := applyOne(s, ix, &Acquire{RequestID: id, Resources: []string{res}, TTL: time.Second, SecretHash: sha256.Sum256([]byte(id))})
	if r.Lease == nil {
		t.Fatalf("acquire %s: %v", id, r.Err)
	}
	return r.Lease
}

func TestFencedPut(t *testing.T) {
	s, ix := kvTestState()
	l1 := grantLease(t, s, ix, "a", "r")
	if r := applyOne(s, ix, &Put{Key: "k", Value: []byte("1"), Fence: &leasehold.Fence{Resource: "r", Token: l1.Token}}); r.Err != nil {
		t.Fatalf("holder's fenced put: %v", r.Err)
	}
	// Released: refused at once, before anyone else acquires.
	applyOne(s, ix, &Release{LeaseID: l1.ID, SecretHash: sha256.Sum256([]byte("a"))})
	r := applyOne(s, ix, &Put{Key: "k", Value: []byte("2"), Fence: &leasehold.Fence{Resource: "r", Token: l1.Token}})
	if !errors.Is(r.Err, leasehold.ErrStaleToken) {
		t.Fatalf("put after release: %v, want stale token", r.Err)
	}
	l2 := grantLease(t, s, ix, "b", "r")
	r = applyOne(s, ix, &Put{Key: "k", Value: []byte("3"), Fence: &leasehold.Fence{Resource: "r", Token: l1.Token}})
	if !errors.Is(r.Err, leasehold.ErrStaleToken) {
		t.Fatalf("old holder's put: %v, want stale token", r.Err)
	}
	if it, _ := s.Get("k"); string(it.Value) != "1" {
		t.Fatalf("value %q after refused writes, want 1", it.Value)
	}
	if err := s.CheckFence("r", l2.Token); err != nil {
		t.Fatalf("current holder's fence: %v", err)
	}
	// The node counts refused writes from their results
	// (leasehold_fence_rejections_total); the replicated state does not.
	// Expired: refused too.
	applyOne(s, ix, &Expire{LeaseID: l2.ID})
	if err := s.CheckFence("r", l2.Token); !errors.Is(err, leasehold.ErrStaleToken) {
		t.Fatalf("fence of an expired lease: %v", err)
	}
}

func TestVersionedPut(t *testing.T) {
	s, ix := kvTestState()
	r := applyOne(s, ix, &Put{Key: "k", Value: []byte("a"), HasIfVersion: true, IfVersion: 0})
	if r.Err != nil || r.Version() != *ix {
		t.Fatalf("create: %+v", r)
	}
	v := r.Version()
	if r := applyOne(s, ix, &Put{Key: "k", Value: []byte("b"), HasIfVersion: true, IfVersion: 0}); !errors.Is(r.Err, leasehold.ErrVersionMismatch) {
		t.Fatalf("create over existing: %v", r.Err)
	}
	if r := applyOne(s, ix, &Put{Key: "k", Value: []byte("b"), HasIfVersion: true, IfVersion: v + 100}); !errors.Is(r.Err, leasehold.ErrVersionMismatch) {
		t.Fatalf("stale version: %v", r.Err)
	}
	if r := applyOne(s, ix, &Put{Key: "k", Value: []byte("b"), HasIfVersion: true, IfVersion: v}); r.Err != nil {
		t.Fatalf("cas: %v", r.Err)
	}
	if r := applyOne(s, ix, &Delete{Key: "k", HasIfVersion: true, IfVersion: v}); !errors.Is(r.Err, leasehold.ErrVersionMismatch) {
		t.Fatalf("delete at old version: %v", r.Err)
	}
	if r := applyOne(s, ix, &Delete{Key: "k"}); r.Err != nil {
		t.Fatalf("delete: %v", r.Err)
	}
	if _, ok := s.Get("k"); ok {
		t.Fatal("deleted key still there")
	}
	if r := applyOne(s, ix, &Put{Key: "big", Value: make([]byte, leasehold.MaxValueBytes+1)}); !errors.Is(r.Err, leasehold.ErrInvalid) {
		t.Fatalf("oversized value: %v", r.Err)
	}
	// A retried put is applied once.
	p := &Put{RequestID: "p1", Key: "n", Value: []byte("x")}
	first := applyOne(s, ix, p)
	again := applyOne(s, ix, p)
	if !again.Dup || again.Version() != first.Version() {
		t.Fatalf("retry: %+v, first %+v", again, first)
	}
	// Snapshots carry the key space.
	rs, err := Restore(s.Snapshot(), DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if it, ok := rs.Get("n"); !ok || string(it.Value) != "x" || it.Version != first.Version() {
		t.Fatalf("restored item %+v %v", it, ok)
	}
}

// For random interleavings of grants, releases, expiries and fenced writes
// with random tokens, a fenced write is accepted exactly when its token is
// the current holder's, and so every accepted token is >= every token
// accepted before it.
func TestFencedWritesProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s, ix := kvTestState()
		var issued []uint64
		var holder *leasehold.Lease
		var holderID string
		maxAccepted := uint64(0)
		n := 0
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0:
				if holder == nil {
					holderID = fmt.Sprint("h", n)
					n++
					holder = grantLease(t, s, ix, holderID, "r")
					issued = append(issued, holder.Token)
				}
			case 1:
				if holder != nil {
					applyOne(s, ix, &Release{LeaseID: holder.ID, SecretHash: sha256.Sum256([]byte(holderID))})
					holder = nil
				}
			case 2:
				if holder != nil {
					applyOne(s, ix, &Expire{LeaseID: holder.ID, RenewCount: holder.RenewCount})
					holder = nil
				}
			case 3:
				tok := rapid.Uint64Range(0, *ix+2).Draw(t, "token")
				if len(issued) > 0 && rapid.Bool().Draw(t, "issued") {
					tok = rapid.SampledFrom(issued).Draw(t, "issued token")
				}
				r := applyOne(s, ix, &Put{Key: "k", Value: []byte{byte(tok)}, Fence: &leasehold.Fence{Resource: "r", Token: tok}})
				want := holder != nil && tok == holder.Token
				if (r.Err == nil) != want {
					t.Fatalf("write with token %d (holder %v): err=%v, want accepted=%v", tok, holder, r.Err, want)
				}
				if r.Err == nil {
					if tok < maxAccepted {
						t.Fatalf("accepted token %d after %d", tok, maxAccepted)
					}
					maxAccepted = tok
				} else if !errors.Is(r.Err, leasehold.ErrStaleToken) {
					t.Fatalf("refusal %v is not a stale token", r.Err)
				}
			}
		}
	})
}
