package fsm

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// A request ID is the caller's own: another caller who sends the same one
// (by accident or on purpose) gets an answer to its own request, never the
// first caller's, and can never end what the first caller got.
func TestRequestIDScopedToCaller(t *testing.T) {
	// as returns acq(id) sent by caller with the secret named secretName.
	as := func(caller, secretName, id string, resources ...string) *Acquire {
		c := acq(id, resources...)
		c.Caller, c.SecretHash, c.Owner = caller, secret(secretName), "owner-"+caller+"-"+secretName
		return c
	}
	for _, tc := range []struct {
		name            string
		first, second   *Acquire // the same request ID
		sameRequestSent bool
	}{
		{"two callers without auth, each with its own secret",
			as("", "a", "job-1", "x"), as("", "b", "job-1", "y"), false},
		{"two identities with the same secret",
			as("alice", "s", "job-1", "x"), as("bob", "s", "job-1", "y"), false},
		{"another identity repeating the whole request",
			as("alice", "s", "job-1", "x"), as("bob", "s", "job-1", "x"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			first := h.mustGrant(tc.first)
			r := h.one(tc.second)
			if r.Dup {
				t.Fatalf("the second caller was answered from the first's record: %s", summarize(r))
			}
			if r.Lease != nil && r.Lease.ID == first.ID {
				t.Fatalf("the second caller got the first caller's lease %d", first.ID)
			}
			if tc.sameRequestSent {
				// It asked for the very resource the first caller holds.
				wantCode(t, "the same request from another caller", r, leasehold.CodeHeld)
			} else if r.Lease == nil || r.Lease.Owner != tc.second.Owner {
				t.Fatalf("the second caller's own acquire: %s, want a grant of its own", summarize(r))
			}
			// The second caller went away: its withdrawal names its own
			// scope, and leaves the first caller's grant alone.
			cancel := &Cancel{Key: tc.second.Key(), Attempt: tc.second.Attempt}
			h.one(cancel)
			if h.holder(tc.first.Resources[0]) != first.ID {
				t.Fatal("the second caller's withdrawal ended the first caller's lease")
			}
			// The first caller's retry still gets its own answer.
			if r := h.one(tc.first); !r.Dup || r.Lease == nil || r.Lease.ID != first.ID {
				t.Fatalf("the first caller's retry: %s, want lease %d", summarize(r), first.ID)
			}
		})
	}

	t.Run("a waiter is withdrawn only from its own scope", func(t *testing.T) {
		h := newHarness(t)
		holder := h.mustGrant(acq("h", "x"))
		w := as("alice", "a", "job-1", "x")
		w.Wait, w.Attempt = time.Minute, "A"
		h.mustQueue(w)
		// bob uses alice's request ID (and attempt name): his acquire is
		// his own, and his Cancel and WaitTimeout name his own scope.
		b := as("bob", "b", "job-1", "x")
		b.Wait, b.Attempt = time.Minute, "A"
		if r := h.one(b); !r.Queued || r.Dup {
			t.Fatalf("bob's acquire: %s, want queued on its own", summarize(r))
		}
		h.one(&Cancel{Key: b.Key(), Attempt: "A"})
		h.one(&WaitTimeout{Key: requestKey("bob", secret("a"), "job-1")}) // alice's secret, bob's name
		if q := h.queue("x"); len(q) != 1 || q[0] != "job-1" {
			t.Fatalf("queue %v, want alice's waiter alone", q)
		}
		h.one(release(holder, "h"))
		if l, _ := h.s.Holder("x"); l.Owner != w.Owner {
			t.Fatalf("x went to %q, want alice's waiter", l.Owner)
		}
	})

	t.Run("releases and KV writes are scoped too", func(t *testing.T) {
		h := newHarness(t)
		a := h.mustGrant(as("alice", "a", "ja", "x"))
		b := h.mustGrant(as("bob", "b", "jb", "y"))
		ra := &Release{RequestID: "rel-1", LeaseID: a.ID, SecretHash: secret("a"), Caller: "alice"}
		rb := &Release{RequestID: "rel-1", LeaseID: b.ID, SecretHash: secret("b"), Caller: "bob"}
		if r := h.one(ra); r.Lease == nil || r.Lease.ID != a.ID {
			t.Fatalf("alice's release: %s", summarize(r))
		}
		if r := h.one(rb); r.Dup || r.Lease == nil || r.Lease.ID != b.ID {
			t.Fatalf("bob's release with alice's request ID: %s, want his own lease %d released", summarize(r), b.ID)
		}
		pa := &Put{RequestID: "put-1", Key: "k", Value: []byte("alice"), Caller: "alice"}
		pb := &Put{RequestID: "put-1", Key: "k", Value: []byte("bob"), Caller: "bob"}
		h.one(pa)
		if r := h.one(pb); r.Dup || r.Err != nil {
			t.Fatalf("bob's put with alice's request ID: %s (%v), want a write of its own", summarize(r), r.Err)
		}
		if it, _ := h.s.Get("k"); string(it.Value) != "bob" {
			t.Fatalf("k = %q, want bob's write", it.Value)
		}
	})
}

// A retry must repeat its request: the same request ID from the same
// caller and secret asking for something else is refused, with a message
// that says nothing about the first request.
func TestRetryMustBeTheSameRequest(t *testing.T) {
	base := func() *Acquire {
		c := acq("job-7", "secret/resource")
		c.Owner, c.Operation, c.Metadata = "first-owner", "first-operation", map[string]string{"note": "first-meta"}
		return c
	}
	changes := map[string]func(c *Acquire){
		"resources":  func(c *Acquire) { c.Resources = []string{"other"} },
		"ttl":        func(c *Acquire) { c.TTL += time.Second },
		"wait":       func(c *Acquire) { c.Wait = time.Minute },
		"owner":      func(c *Acquire) { c.Owner = "someone" },
		"operation":  func(c *Acquire) { c.Operation = "other-op" },
		"metadata":   func(c *Acquire) { c.Metadata = map[string]string{"note": "x"} },
		"lock delay": func(c *Acquire) { c.LockDelay = time.Second },
		"max hold":   func(c *Acquire) { c.MaxHold = time.Minute },
	}
	for _, waiting := range []bool{false, true} {
		for name, change := range changes {
			t.Run(fmt.Sprintf("%s/waiting=%v", name, waiting), func(t *testing.T) {
				h := newHarness(t)
				first := base()
				if waiting {
					h.mustGrant(acq("holder", "secret/resource"))
					first.Wait = 30 * time.Second
					h.mustQueue(first)
				} else {
					h.mustGrant(first)
				}
				h.obs.take()
				retry := base()
				retry.Wait = first.Wait
				change(retry)
				r := h.one(retry)
				wantCode(t, "a changed retry", r, leasehold.CodeInvalid)
				msg := r.Err.Error()
				for _, secretly := range []string{"secret/resource", "first-owner", "first-operation", "first-meta", "lease"} {
					if strings.Contains(msg, secretly) {
						t.Errorf("the refusal %q tells of the first request (%q)", msg, secretly)
					}
				}
				if !strings.Contains(msg, "job-7") || !strings.Contains(msg, "different request") {
					t.Errorf("the refusal %q does not say the request_id was used for another request", msg)
				}
				wantEvents(t, h.obs) // it changed nothing
				if r := h.one(first); !r.Dup || r.Err != nil {
					t.Fatalf("the unchanged retry: %s (%v), want the first answer", summarize(r), r.Err)
				}
			})
		}
	}
	t.Run("a changed release", func(t *testing.T) {
		h := newHarness(t)
		a := h.mustGrant(acq("a", "x"))
		b := h.mustGrant(acq("b", "y"))
		h.one(&Release{RequestID: "rel", LeaseID: a.ID, SecretHash: secret("a")})
		r := h.one(&Release{RequestID: "rel", LeaseID: b.ID, SecretHash: secret("a")})
		wantCode(t, "a release retried for another lease", r, leasehold.CodeInvalid)
		if h.holder("y") != b.ID {
			t.Fatal("the refused release ended a lease")
		}
	})
}
