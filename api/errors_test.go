package api

import (
	"errors"
	"testing"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
)

// A batch operation's error names its Connect code, and the client reads
// it back as the leasehold error it was (and reads the names older servers
// sent, too).
func TestBatchErrorRoundTrip(t *testing.T) {
	for c := leasehold.CodeInvalid; c <= leasehold.CodeUnauthenticated; c++ {
		e := ToBatchError(&leasehold.Error{Code: c, Message: "m"})
		if want := toConnect[c].String(); e.GetCode() != want {
			t.Errorf("%v: batch code %q, want the Connect name %q", c, e.GetCode(), want)
		}
		back := FromBatchError(e)
		if got := leasehold.CodeOf(back); got != c || back.Error() != "m" {
			t.Errorf("%v: read back as %v %q", c, got, back.Error())
		}
	}
	for name, want := range map[string]error{"held": leasehold.ErrHeld, "not_holder": leasehold.ErrNotHolder,
		"invalid": leasehold.ErrInvalid, "wait_timeout": leasehold.ErrWaitTimeout} {
		if got := FromBatchError(&pb.BatchError{Code: name}); !errors.Is(got, want) {
			t.Errorf("legacy code %q read as %v, want %v", name, leasehold.CodeOf(got), want)
		}
	}
}

// A conflict (a name in use as another kind) is FailedPrecondition on the
// wire, like not-the-holder, and comes back as a conflict, alone or in a
// batch, through leasehold's own code name.
func TestConflictRoundTrip(t *testing.T) {
	err := &leasehold.Error{Code: leasehold.CodeConflict, Message: "m"}
	ce := ToConnect(err)
	if got := connectCode(ce); got != "failed_precondition" {
		t.Fatalf("conflict is %s on the wire, want failed_precondition", got)
	}
	if back := FromConnect(ce); !errors.Is(back, leasehold.ErrConflict) {
		t.Fatalf("conflict read back as %v", leasehold.CodeOf(back))
	}
	be := ToBatchError(err)
	if be.GetCode() != "failed_precondition" || !errors.Is(FromBatchError(be), leasehold.ErrConflict) {
		t.Fatalf("conflict in a batch: %v, read back as %v", be, leasehold.CodeOf(FromBatchError(be)))
	}
	if got := FromBatchError(&pb.BatchError{Code: "failed_precondition"}); !errors.Is(got, leasehold.ErrNotHolder) {
		t.Fatalf("failed_precondition without leasehold's code read as %v, want not_holder", leasehold.CodeOf(got))
	}
}

func connectCode(err error) string {
	var ce interface{ Code() connect.Code }
	if !errors.As(err, &ce) {
		return ""
	}
	return ce.Code().String()
}
