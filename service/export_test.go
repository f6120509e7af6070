package service

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/fsm"
)

// SetIdemFallbackPoll sets how often a waiting Begin polls, for the
// duration of t.
func SetIdemFallbackPoll(t testing.TB, d time.Duration) {
	old := idemFallbackPoll
	idemFallbackPoll = d
	t.Cleanup(func() { idemFallbackPoll = old })
}

// EventOf is the Event a watcher is handed for the state machine's e.
func EventOf(e fsm.Event) Event {
	s := slotOf(&e)
	return s.event()
}
