package integration

import (
	"context"
	"errors"
	"fmt"
	"github.com/leasehold/leasehold/internal/testcluster"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// readUntil collects w's events until one at index last or later, or
// fails after timeout.
func readUntil(t *testing.T, w *client.Watch, last uint64, timeout time.Duration) []client.Event {
	t.Helper()
	var got []client.Event
	deadline := time.After(timeout)
	for {
		select {
		case e, ok := <-w.Events():
			if !ok {
				t.Fatalf("watch ended after %d events (index %d): %v", len(got), w.Index(), w.Err())
			}
			got = append(got, e)
			if e.Index >= last {
				return got
			}
		case <-deadline:
			t.Fatalf("no event at index %d within %v (got %d events)", last, timeout, len(got))
		}
	}
}

// TestWatchMovesNodesWithoutGapOrRepeat: a watch served by a follower of a
// 3-node cluster under write load, whose node is killed and later the
// leader too, moves to the other nodes and resumes; the events it got are
// exactly the log's (as a surviving node serves them from the start), in
// order, and every acknowledged write is among them once.
func TestWatchMovesNodesWithoutGapOrRepeat(t *testing.T) {
	c := testcluster.Start(t, 3)
	lead := c.Leader()
	watched := (lead + 1) % 3
	other := (lead + 2) % 3
	// The watch client lists the watched follower first, then the other
	// follower, then the leader.
	wc := newTestClient(t, 2*time.Second, c.URL(watched), c.URL(other), c.URL(lead))
	ctx := ctxFor(t, 2*time.Minute)
	w := wc.Watch(ctx, []string{"w/"}, client.FromIndex(0))

	var mu sync.Mutex
	acked := map[string]uint64{} // key -> version acknowledged
	load, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := newTestClient(t, 2*time.Second, c.URLs()...)
			for n := 0; load.Err() == nil; n++ {
				key := fmt.Sprintf("w/%d/%d", g, n)
				v, err := cl.Put(load, key, []byte("x"))
				if err == nil {
					mu.Lock()
					acked[key] = v
					mu.Unlock()
				}
				cl.Put(load, fmt.Sprintf("other/%d", g), []byte("y")) // not watched
			}
		}()
	}
	ackedCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	waitFor(t, 20*time.Second, "writes before the kill", func() (bool, string) { return ackedCount() > 50, fmt.Sprint(ackedCount()) })
	c.Kill(watched) // the node the watch reads from
	n := ackedCount()
	waitFor(t, 20*time.Second, "writes after the follower's kill", func() (bool, string) { return ackedCount() > n+50, fmt.Sprint(ackedCount()) })
	c.Restart(watched)
	c.Kill(lead)
	c.WaitNewLeader(lead, 20*time.Second)
	n = ackedCount()
	waitFor(t, 30*time.Second, "writes after the leader's kill", func() (bool, string) { return ackedCount() > n+50, fmt.Sprint(ackedCount()) })
	stopLoad()
	wg.Wait()

	final := newTestClient(t, 2*time.Second, c.URLs()...)
	last, err := final.Put(ctx, "w/end", []byte("end"))
	if err != nil {
		t.Fatal(err)
	}
	got := readUntil(t, w, last, 30*time.Second)

	// The log's events, from a node that never went down.
	survivor := newTestClient(t, 2*time.Second, c.URL(other))
	want := readUntil(t, survivor.Watch(ctx, []string{"w/"}, client.FromIndex(0)), last, 30*time.Second)
	if len(got) != len(want) {
		t.Errorf("the moving watch got %d events, the log has %d", len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		g, x := got[i], want[i]
		if g.Index != x.Index || g.Kind != x.Kind || g.Key != x.Key || g.Version != x.Version {
			t.Fatalf("event %d: got %+v, the log has %+v", i, g, x)
		}
	}
	seen := map[string]int{}
	for _, e := range got {
		if e.Kind == "put" {
			seen[fmt.Sprintf("%s@%d", e.Key, e.Version)]++
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for k, v := range acked {
		if n := seen[fmt.Sprintf("%s@%d", k, v)]; n != 1 {
			t.Errorf("acknowledged put of %s at version %d seen %d times", k, v, n)
		}
	}
	t.Logf("%d events over two kills, %d acknowledged puts, all seen once", len(got), len(acked))
}

// TestWatchOutOfRangeWhenNoNodeKeepsTheHistory: a node restarted from a
// snapshot keeps no events before it; the Go client's watch from an older
// index ends with out_of_range naming the oldest index it can resume
// from, and a watch from that index gets what follows.
func TestWatchOutOfRangeWhenNoNodeKeepsTheHistory(t *testing.T) {
	dir := t.TempDir()
	n := testcluster.StartNode(t, dir)
	cl := newTestClient(t, 2*time.Second, n.URL)
	ctx := ctxFor(t, time.Minute)
	var snapAt uint64
	for i := range 5 {
		v, err := cl.Put(ctx, fmt.Sprintf("jobs/%d", i), []byte("v"))
		if err != nil {
			t.Fatal(err)
		}
		snapAt = v
	}
	if err := n.Cluster.Snapshot(); err != nil {
		t.Fatal(err)
	}
	n.Stop()
	n = testcluster.StartNode(t, dir)
	cl = newTestClient(t, 2*time.Second, n.URL)

	w := cl.Watch(ctx, []string{"jobs/"}, client.FromIndex(1))
	for e := range w.Events() {
		t.Fatalf("a watch from before the snapshot delivered %+v", e)
	}
	err := w.Err()
	if !errors.Is(err, leasehold.ErrOutOfRange) || !strings.Contains(err.Error(), fmt.Sprintf("resume from is %d", snapAt)) {
		t.Fatalf("watch from 1 after a restart from the snapshot at %d: %v, want out_of_range naming %d", snapAt, err, snapAt)
	}
	w = cl.Watch(ctx, []string{"jobs/"}, client.FromIndex(snapAt))
	v, err := cl.Put(ctx, "jobs/after", []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	got := readUntil(t, w, v, 10*time.Second)
	if len(got) != 1 || got[0].Key != "jobs/after" {
		t.Fatalf("watch from the snapshot's index: %+v, want the one put after it", got)
	}
}

// TestWatchOutOfRangeOnOneNodeMovesToAnother: a node restarted from a
// snapshot lacks the old events, but another node keeps them: the
// client's watch from an old index moves there instead of failing, and
// gets the whole log.
func TestWatchOutOfRangeOnOneNodeMovesToAnother(t *testing.T) {
	c := testcluster.Start(t, 3)
	cl := newTestClient(t, 2*time.Second, c.URLs()...)
	ctx := ctxFor(t, time.Minute)
	var last uint64
	for i := range 5 {
		v, err := cl.Put(ctx, fmt.Sprintf("jobs/%d", i), []byte("v"))
		if err != nil {
			t.Fatal(err)
		}
		last = v
	}
	if err := c.WaitApplied(last, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	short := (c.Leader() + 1) % 3 // a follower, restarted from its snapshot
	keeps := (c.Leader() + 2) % 3
	if err := c.Node(short).Cluster.Snapshot(); err != nil {
		t.Fatal(err)
	}
	c.Kill(short)
	c.Restart(short)

	only := newTestClient(t, 2*time.Second, c.URL(short))
	w := only.Watch(ctx, []string{"jobs/"}, client.FromIndex(0))
	for range w.Events() {
	}
	if !errors.Is(w.Err(), leasehold.ErrOutOfRange) {
		t.Fatalf("the restarted node alone: %v, want out_of_range", w.Err())
	}
	both := newTestClient(t, 2*time.Second, c.URL(short), c.URL(keeps))
	got := readUntil(t, both.Watch(ctx, []string{"jobs/"}, client.FromIndex(0)), last, 20*time.Second)
	if len(got) != 5 || got[0].Key != "jobs/0" || got[4].Key != "jobs/4" {
		t.Fatalf("the restarted node, then one that keeps the history: %+v, want the 5 puts", got)
	}
}
