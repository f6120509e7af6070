package faults

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
)

// TestWatchAcrossProcessKills: a Go client's watch served by a follower
// of a 3-process cluster under write load; the follower is SIGKILLed (and
// restarted), then the leader. The watch moves nodes and resumes: the
// events it got are exactly the log's as a node that never died serves
// them, and every acknowledged put is among them once.
func TestWatchAcrossProcessKills(t *testing.T) {
	nodes := startCluster(t, 3)
	c := newClient(t, "", urls(nodes)...)
	ld, err := leader(nodes, c)
	if err != nil {
		t.Fatal(err)
	}
	var followers []*node
	for _, n := range nodes {
		if n != ld {
			followers = append(followers, n)
		}
	}
	watched, survivor := followers[0], followers[1]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w := newClient(t, "", watched.url, survivor.url, ld.url).Watch(ctx, []string{"w/"}, client.FromIndex(0))

	var mu sync.Mutex
	acked := map[string]uint64{}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	load, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lc := newClient(t, "", urls(nodes)...)
			for i := 0; load.Err() == nil; i++ {
				key := fmt.Sprintf("w/%d/%d", g, i)
				if v, err := lc.Put(load, key, []byte("x")); err == nil {
					mu.Lock()
					acked[key] = v
					mu.Unlock()
				}
			}
		}()
	}
	more := func(what string) {
		t.Helper()
		n := count()
		if err := checkFor(progressTimeout, func() error {
			if count() < n+30 {
				return fmt.Errorf("%d acknowledged puts", count()-n)
			}
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	more("before the kills")
	if err := watched.p.Kill(); err != nil {
		t.Fatal(err)
	}
	more("with the watched follower killed")
	if err := watched.start(); err != nil {
		t.Fatal(err)
	}
	if err := ld.p.Kill(); err != nil {
		t.Fatal(err)
	}
	more("with the leader killed")
	if err := ld.start(); err != nil {
		t.Fatal(err)
	}
	stopLoad()
	wg.Wait()

	last, err := c.Put(ctx, "w/end", []byte("end"))
	if err != nil {
		t.Fatal(err)
	}
	read := func(w *client.Watch, who string) []client.Event {
		t.Helper()
		var got []client.Event
		for {
			select {
			case e, ok := <-w.Events():
				if !ok {
					t.Fatalf("%s: watch ended after %d events: %v", who, len(got), w.Err())
				}
				got = append(got, e)
				if e.Index >= last {
					return got
				}
			case <-time.After(progressTimeout):
				t.Fatalf("%s: no event at index %d within %v (got %d)", who, last, progressTimeout, len(got))
			}
		}
	}
	got := read(w, "the moving watch")
	want := read(newClient(t, "", survivor.url).Watch(ctx, []string{"w/"}, client.FromIndex(0)), "the survivor")
	if len(got) != len(want) {
		t.Errorf("the moving watch got %d events, the log has %d", len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		if g, x := got[i], want[i]; g.Index != x.Index || g.Kind != x.Kind || g.Key != x.Key || g.Version != x.Version {
			t.Fatalf("event %d: got %+v, the log has %+v", i, g, x)
		}
	}
	seen := map[string]int{}
	for _, e := range got {
		seen[fmt.Sprintf("%s@%d", e.Key, e.Version)]++
	}
	mu.Lock()
	defer mu.Unlock()
	for k, v := range acked {
		if n := seen[fmt.Sprintf("%s@%d", k, v)]; n != 1 {
			t.Errorf("acknowledged put of %s at version %d seen %d times", k, v, n)
		}
	}
	t.Logf("%d events across two SIGKILLs, %d acknowledged puts, each seen once", len(got), len(acked))
}
