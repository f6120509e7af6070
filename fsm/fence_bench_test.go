package fsm

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// The cost of checking each kind of fence target against a state with a
// held lease, a 1,024-partition group and a queue with a delivery in
// flight: all are map look-ups, no scans.
func BenchmarkCheckFenceTarget(b *testing.B) {
	h := newHarness(b)
	l := h.mustGrant(acq("r1", "res"))
	if r := h.one(&GroupCreate{Group: "g", Partitions: 1024}); r.Err != nil {
		b.Fatal(r.Err)
	}
	if r := h.one(join("g", "a")); r.Err != nil {
		b.Fatal(r.Err)
	}
	d, _ := h.s.Group("g")
	h.one(&QueueCreate{Queue: "q", Settings: QueueSettings{Visibility: time.Minute}})
	h.one(&QueueSend{Queue: "q", Messages: []QueueMessage{{Key: "k", Body: []byte("b")}}})
	dl := h.one(&QueueReceive{Queue: "q", Max: 1}).Queue().Deliveries[0]
	for name, f := range map[string]leasehold.Fence{
		"resource":  {Resource: "res", Token: l.Token},
		"partition": {Group: "g", Partition: 1000, Token: d.Partitions[1000].Epoch},
		"delivery":  {Queue: "q", Key: "k", Token: dl.Token},
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if err := h.s.CheckFenceTarget(f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
