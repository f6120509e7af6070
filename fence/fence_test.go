package fence_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fence"
)

func TestStaleTokenError(t *testing.T) {
	var err error = &fence.StaleTokenError{Resource: "r", Offered: 3, Current: 7}
	err = fmt.Errorf("write: %w", err)
	if !errors.Is(err, fence.ErrStaleToken) || !errors.Is(err, leasehold.ErrStaleToken) {
		t.Fatalf("errors.Is(%v, ErrStaleToken) = false", err)
	}
	if errors.Is(err, leasehold.ErrInvalid) {
		t.Fatalf("stale token error matches ErrInvalid")
	}
	if c := leasehold.CodeOf(err); c != leasehold.CodeStaleToken {
		t.Fatalf("CodeOf = %v, want stale_token", c)
	}
	var st *fence.StaleTokenError
	if !errors.As(err, &st) || st.Offered != 3 || st.Current != 7 || st.Resource != "r" {
		t.Fatalf("errors.As gave %+v", st)
	}
	if want := `write: stale fencing token for resource "r": offered 3, current 7`; err.Error() != want {
		t.Fatalf("Error() = %q, want %q", err.Error(), want)
	}
}
