package integration

import (
	"context"
	"fmt"
	"github.com/leasehold/leasehold/internal/testcluster"
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
// an election while candidates come and go (the second starts midway), a
// neighbour election whose name it prefixes changes too, the raft leader
// node (the first observer's) is killed, and then the second observer's
// node. Both see the same sequence of leaders from where the second began
// (its first answer being the first's leader at that index), in
// increasing log order with no repeat, matching the terms the candidates
// were granted and nothing of the neighbour's.
func TestObserveSameLeaders(t *testing.T) {
	c := testcluster.Start(t, 3)
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
	startObserver := func(i int, order ...int) {
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
		waitFor(t, 10*time.Second, "the observer's first answer", func() (bool, string) { return len(obs[i].get()) > 0, "waiting" })
	}
	startObserver(0, lead, others[0], others[1])
	if first := obs[0].get()[0]; first.LeaseID != 0 {
		t.Fatalf("observer 0: first answer %+v; want nobody leading yet", first)
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
	// A neighbour whose name the observed one is a prefix of: none of its
	// leaders may show.
	neighbour := newTestClient(t, time.Second, c.URLs()...)
	wg.Go(func() { campaigner(cctx, neighbour, "e/observed2", "n", 200*time.Millisecond, func(belief) {}) })
	terms := func() int { mu.Lock(); defer mu.Unlock(); return len(beliefs) }
	// The second observer starts while leaders change.
	waitFor(t, 20*time.Second, "terms before the second observer", func() (bool, string) {
		return terms() >= 2, fmt.Sprintf("%d terms", terms())
	})
	startObserver(1, others[0], others[1], lead)
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
		return la.LeaseID == 0 && lb.LeaseID == 0 && la.Index == lb.Index,
			fmt.Sprintf("observer 0 is at index %d, observer 1 at %d", la.Index, lb.Index)
	})
	stop()
	owg.Wait()

	a, b := obs[0].get(), obs[1].get()
	for i := 1; i < len(a); i++ {
		if a[i].Index <= a[i-1].Index {
			t.Fatalf("change %d at index %d does not follow index %d", i, a[i].Index, a[i-1].Index)
		}
	}
	// The second observer's first answer is the leader the first observer
	// had at that index, and from there on both saw the same changes.
	same := func(x, y client.LeaderChange) bool {
		return x.LeaseID == y.LeaseID && x.Token == y.Token && x.Value == y.Value
	}
	k := 0
	for k+1 < len(a) && a[k+1].Index <= b[0].Index {
		k++
	}
	if !same(a[k], b[0]) {
		t.Fatalf("observer 1 began at index %d with %+v; observer 0 had %+v there", b[0].Index, b[0], a[k])
	}
	rest := a[k+1:]
	if len(rest) != len(b)-1 {
		t.Fatalf("after index %d observer 0 saw %d changes, observer 1 %d", b[0].Index, len(rest), len(b)-1)
	}
	for i, x := range rest {
		if y := b[i+1]; x.Index != y.Index || !same(x, y) {
			t.Fatalf("change at %d: observer 0 saw %+v, observer 1 saw %+v", i, x, y)
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
	t.Logf("observer 0 saw %d changes (%d terms); observer 1, from index %d, the same %d", len(a)-1, len(granted), b[0].Index, len(b)-1)
}
