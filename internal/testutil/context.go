package testutil

import (
	"context"
	"testing"
	"time"
)

// Context is t.Context() bounded by d: it ends when d passes or when the
// test finishes, whichever comes first, so a call that never returns fails
// the test instead of hanging it. Cleanup functions run after it ended;
// they make their own.
func Context(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
