package api

import (
	"errors"
	"testing"

	"github.com/leasehold/leasehold"
	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
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
