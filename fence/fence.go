package fence

import (
	"fmt"

	"github.com/leasehold/leasehold/api/leasehold"
)

// ErrStaleToken is leasehold.ErrStaleToken, so errors.Is(err,
// fence.ErrStaleToken) and errors.Is(err, leasehold.ErrStaleToken) agree.
var ErrStaleToken = leasehold.ErrStaleToken

// StaleTokenError is the rejection of a token below the resource's
// high-water mark. It matches ErrStaleToken with errors.Is, and
// leasehold.CodeOf reports CodeStaleToken for it.
type StaleTokenError struct {
	Resource string
	Offered  uint64 // the token the writer presented
	Current  uint64 // the high-water mark that refused it
}

func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("stale fencing token for resource %q: offered %d, current %d",
		e.Resource, e.Offered, e.Current)
}

// Unwrap exposes the error as a *leasehold.Error with CodeStaleToken, which is
// how the API edge and errors.Is recognize it.
func (e *StaleTokenError) Unwrap() error {
	return &leasehold.Error{Code: leasehold.CodeStaleToken, Message: e.Error()}
}
