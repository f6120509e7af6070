package fsm

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// The barriers limit: the one past max_barriers is refused with
// resource_exhausted naming the limit; a delete makes room again.
func TestBarrierCountLimit(t *testing.T) {
	s := New(DefaultConfig(), nil)
	ix := uint64(0)
	create := func(name string) Result {
		ix++
		return s.Apply(ix, &Batch{Time: t0 + int64(ix)*int64(time.Millisecond), Cmds: []Command{
			&BarrierCreate{Name: name, Type: leasehold.BarrierLatch, Parties: 1}}})[0]
	}
	for i := range leasehold.MaxBarriers {
		if r := create(fmt.Sprint("b/", i)); r.Err != nil {
			t.Fatalf("barrier %d: %v", i, r.Err)
		}
	}
	r := create("one-too-many")
	if leasehold.CodeOf(r.Err) != leasehold.CodeLimit || !strings.Contains(r.Err.Error(), "max_barriers") {
		t.Fatalf("barrier %d: %v; want resource_exhausted naming max_barriers", leasehold.MaxBarriers+1, r.Err)
	}
	ix++
	if r := s.Apply(ix, &Batch{Time: t0 + int64(ix)*int64(time.Millisecond), Cmds: []Command{
		&BarrierDelete{RequestID: "d", Name: "b/0"}}})[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := create("one-too-many"); r.Err != nil {
		t.Fatalf("after a delete: %v", r.Err)
	}
}
