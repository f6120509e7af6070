package service

import (
	"testing"
	"time"
)

// SetIdemFallbackPoll sets how often a waiting Begin polls, for the
// duration of t.
func SetIdemFallbackPoll(t testing.TB, d time.Duration) {
	old := idemFallbackPoll
	idemFallbackPoll = d
	t.Cleanup(func() { idemFallbackPoll = old })
}
