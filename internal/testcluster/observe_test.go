package testcluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
)

// observed collects what one observer saw.
type observed struct {
	mu      sync.Mutex
	leaders []client.LeaderChange
}

func (o *observed) add(l client.LeaderChange) {
	o.mu.Lock()
	o.leaders = append(o.leaders, l)
	o.mu.Unlock()
}

func (o *observed) get() []client.LeaderChange {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.leaders)
}

// TestObserveSameLeaders: two observers, each on a different node, watch
// an election while candidates come and go, the raft leader node (the
// first observer's) is killed, and then the second observer's node. Both
// see the same sequence of leaders, in increasing log order with no
// repeat, and it agrees with the terms the candidates were granted.
func TestObserveSameLeaders(t *testing.T) {
	c := Start(t, 3)
	lead := c.WaitLeader(10 * time.Second)
	others := []int{(lead + 1) % 3, (lead + 2) % 3}
	urls := func(order ...int) []string {
		var out []string
		for _, i := range order {
			out = append(out, c.URL(i))
		}
		return out
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	obs := []*observed{{}, {}}
	var owg sync.WaitGroup
	for i, order := range [][]int{{lead, others[0], others[1]}, {others[0], others[1], lead}} {
		cl := newTestClient(t, time.Second, urls(order...)...)
		o := cl.Observe(ctx, "e/observed")
		owg.Go(func() {
			for l := range o.Leaders() {
				obs[i].add(l)
			}
			if err := o.Err(); err != nil {
				t.Errorf("observer %d ended: %v", i, err)
			}
		})
	}
	waitFor(t, 10*time.Second, "both observers' first answer", func() (bool, string) {
		return len(obs[0].get()) > 0 && len(obs[1].get()) > 0, "waiting"
	})
	for i := range obs {
		if first := obs[i].get()[0]; first.LeaseID != 0 {
			t.Fatalf("observer %d: first answer %+v; want nobody leading yet", i, first)
		}
	}

	var mu sync.Mutex
	var beliefs []belief
	record := func(b belief) { mu.Lock(); beliefs = append(beliefs, b); mu.Unlock() }
	cctx, stopCandidates := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, name := range []string{"a", "b"} {
		cl := newTestClient(t, time.Second, c.URLs()...)
		wg.Go(func() { campaigner(cctx, cl, "e/observed", name, 300*time.Millisecond, record) })
	}
	terms := func() int { mu.Lock(); defer mu.Unlock(); return len(beliefs) }
	for _, victim := range []int{lead, others[0]} {
		before := terms()
		waitFor(t, 20*time.Second, "terms before a kill", func() (bool, string) {
			return terms() >= before+3, fmt.Sprintf("%d terms", terms()-before)
		})
		t.Logf("killing %s", c.ID(victim))
		c.Kill(victim)
		c.WaitLeader(15 * time.Second)
		after := terms()
		waitFor(t, 20*time.Second, "terms after a kill", func() (bool, string) {
			return terms() >= after+3, fmt.Sprintf("%d terms", terms()-after)
		})
		c.Restart(victim)
	}
	stopCandidates()
	wg.Wait()

	// Every term ends in a resignation, so both observers end on nobody.
	waitFor(t, 20*time.Second, "both observers catching up", func() (bool, string) {
		a, b := obs[0].get(), obs[1].get()
		la, lb := a[len(a)-1], b[len(b)-1]
		return len(a) == len(b) && la.LeaseID == 0 && lb.LeaseID == 0 && la.Index == lb.Index,
			fmt.Sprintf("observer 0 saw %d, observer 1 saw %d", len(a), len(b))
	})
	stop()
	owg.Wait()

	a, b := obs[0].get(), obs[1].get()
	for i := 1; i < len(a); i++ {
		x, y := a[i], b[i]
		if x.Index != y.Index || x.LeaseID != y.LeaseID || x.Token != y.Token || x.Value != y.Value {
			t.Fatalf("change %d: observer 0 saw %+v, observer 1 saw %+v", i, x, y)
		}
		if x.Index <= a[i-1].Index {
			t.Fatalf("change %d at index %d does not follow index %d", i, x.Index, a[i-1].Index)
		}
	}
	// The leaders seen are the terms granted, in order.
	var seen []uint64
	for _, l := range a {
		if l.LeaseID != 0 {
			seen = append(seen, l.Token)
		}
	}
	slices.SortFunc(beliefs, func(x, y belief) int { return x.start.Compare(y.start) })
	var granted []uint64
	for _, b := range beliefs {
		granted = append(granted, b.token)
	}
	// A campaign granted as the candidates stopped was given back unseen
	// by them: at most one per candidate, at the end.
	if len(seen) < len(granted) || len(seen) > len(granted)+2 || !slices.Equal(seen[:len(granted)], granted) {
		t.Errorf("observers saw terms with tokens %v; candidates were granted %v", seen, granted)
	}
	t.Logf("both observers saw the same %d changes (%d terms)", len(a)-1, len(granted))
}
