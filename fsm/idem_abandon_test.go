package fsm

import (
	"testing"

	"github.com/leasehold/leasehold/api/leasehold"
)

// An Abandon retried with its request ID (after a snapshot restore too)
// is answered as the first was, though its attempt is gone; one without
// a request ID, or of an attempt that is not the key's, is refused stale
// and releases nothing.
func TestIdemAbandonRetriedWithARequestIDAnswersAsTheFirst(t *testing.T) {
	q := newQueueRig(t, DefaultConfig(), nil)
	a := q.ok(idemBegin("pay/1", "x", "a")).Idem()
	other := q.ok(idemBegin("pay/2", "x", "b")).Idem()
	if r := q.logged(&IdemAbandon{Key: "pay/1", Release: Release{LeaseID: other.Token, SecretHash: secret("b"), RequestID: "x"}}); leasehold.CodeOf(r.Err) != leasehold.CodeStaleToken {
		t.Fatalf("abandon of pay/2's attempt named as pay/1's: %v, want stale token", r.Err)
	}
	if _, ok := q.s.Lease(other.Token); !ok {
		t.Fatal("a refused abandon released the other key's attempt")
	}
	abandon := &IdemAbandon{Key: "pay/1", Release: Release{LeaseID: a.Token, SecretHash: secret("a"), Caller: "svc", RequestID: "ab1"}}
	if r := q.logged(abandon); r.Err != nil {
		t.Fatalf("abandon: %v", r.Err)
	}
	if _, ok := q.s.IdemGet("pay/1"); ok {
		t.Fatal("the abandoned key is still held")
	}
	q.restart()
	if r := q.logged(abandon); r.Err != nil || !r.Dup {
		t.Fatalf("retried abandon: %+v, want the first answer", r)
	}
	plain := *abandon
	plain.RequestID = ""
	if r := q.logged(&plain); leasehold.CodeOf(r.Err) != leasehold.CodeStaleToken {
		t.Fatalf("abandon without a request id of an ended attempt: %v, want stale token", r.Err)
	}
}
