package fsm

import (
	"testing"
	"unsafe"
)

// A node's watch history holds 100,000 events whatever happens (renewals
// included), so an event is kept to 152 bytes: its small fields packed
// together (spread among the others they took 168).
func TestEventIsSmall(t *testing.T) {
	if size := unsafe.Sizeof(Event{}); size > 152 {
		t.Fatalf("an Event takes %d bytes, want at most 152", size)
	}
}
