package service_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/fsm"
	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/service"
)

// recorder keeps every event the state machine reports, in apply order: the
// log's events, which the hub's watchers must reproduce.
type recorder struct {
	mu     sync.Mutex
	events []fsm.Event
	hub    *service.Hub
}

func (r *recorder) Event(e fsm.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	r.hub.Event(e)
}
func (r *recorder) Applied(index uint64)  { r.hub.Applied(index) }
func (r *recorder) Restored(index uint64) { r.hub.Restored(index) }

// after is the recorded events after from that req watches, as a watcher
// is handed them.
func (r *recorder) after(from uint64, req service.WatchRequest) []service.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []service.Event
	for _, e := range r.events {
		if e.Index > from && matches(e, req) {
			out = append(out, service.EventOf(e))
		}
	}
	return out
}

func matches(e fsm.Event, req service.WatchRequest) bool {
	if e.Kind == fsm.EventRenewed && !req.Renewed {
		return false
	}
	if len(req.Prefixes) == 0 {
		return true
	}
	for _, p := range req.Prefixes {
		if e.Key != "" && strings.HasPrefix(e.Key, p) {
			return true
		}
		for _, r := range e.Resources {
			if strings.HasPrefix(r, p) {
				return true
			}
		}
	}
	return false
}

type watchNode struct {
	svc  *service.Service
	hub  *service.Hub
	rec  *recorder
	node *cluster.Node
}

// startWatchNode opens a real single-voter node (raft, fsync'd log in a
// temp dir) whose history is a hub with cfg, recorded.
func startWatchNode(t *testing.T, cfg service.HubConfig) *watchNode {
	t.Helper()
	return startWatchNodeIn(t, t.TempDir(), cfg)
}

func startWatchNodeIn(t *testing.T, dir string, cfg service.HubConfig) *watchNode {
	t.Helper()
	hub := service.NewHub(cfg)
	rec := &recorder{hub: hub}
	ccfg := cluster.DefaultConfig()
	ccfg.DataDir = dir
	ccfg.RaftListener = testcluster.Listen(t)
	ccfg.RaftAddr = ccfg.RaftListener.Addr().String()
	ccfg.Logger = testcluster.Logger()
	ccfg.History = rec
	node, err := cluster.Open(ccfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := node.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	svc := service.New(node, hub, testcluster.Logger())
	t.Cleanup(svc.Stop)
	return &watchNode{svc: svc, hub: hub, rec: rec, node: node}
}

var reqSeq struct {
	sync.Mutex
	n int
}

func reqID() string {
	reqSeq.Lock()
	defer reqSeq.Unlock()
	reqSeq.n++
	return fmt.Sprintf("req-%d", reqSeq.n)
}

// collect reads w's batches until one at index last or later arrives and
// returns the events before it (of entries up to last). A watcher that
// starts at last has nothing to collect.
func collect(t testing.TB, w *service.Watcher, last uint64) []service.Event {
	t.Helper()
	var got []service.Event
	if w.Start() >= last {
		return nil
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case b, ok := <-w.Batches():
			if !ok {
				t.Fatalf("watcher ended after %d events: %v", len(got), w.Err())
			}
			for _, e := range b.Events {
				if e.Index != b.Index {
					t.Fatalf("batch at %d holds an event of index %d", b.Index, e.Index)
				}
			}
			got = append(got, b.Events...)
			if b.Index >= last {
				return got
			}
		case <-deadline:
			t.Fatalf("no batch at index %d after 20s (got %d events)", last, len(got))
		}
	}
}

func sameEvents(t testing.TB, what string, got, want []service.Event) {
	t.Helper()
	key := func(e service.Event) string {
		return fmt.Sprintf("%d %s lease=%d token=%d res=%v key=%q v=%d", e.Index, e.Kind, e.LeaseID, e.Token, e.Resources, e.Key, e.Version)
	}
	n := max(len(got), len(want))
	for i := range n {
		var g, w string
		if i < len(got) {
			g = key(got[i])
		}
		if i < len(want) {
			w = key(want[i])
		}
		if g != w {
			t.Fatalf("%s: event %d of %d (want %d): got %q, want %q", what, i, len(got), len(want), g, w)
		}
	}
}

// TestWatchReceivesTheLogsEventsAfterAnyPastIndex: for random operations on
// a real node, a watcher started at a random past index (and one started
// before the operations) receives exactly the log's events after it that
// match its prefixes, in log order, with no gap and no duplicate.
func TestWatchReceivesTheLogsEventsAfterAnyPastIndex(t *testing.T) {
	n := startWatchNode(t, service.HubConfig{})
	ctx := context.Background()
	type held struct {
		id     uint64
		secret [32]byte
	}
	prefixSets := [][]string{nil, {"a/"}, {"b/"}, {"a/", "b/k"}, {"c/"}}
	rapid.Check(t, func(rt *rapid.T) {
		reqA := service.WatchRequest{Prefixes: rapid.SampledFrom(prefixSets).Draw(rt, "live prefixes"),
			Renewed: rapid.Bool().Draw(rt, "live renewed"), Now: true}
		live, err := n.svc.Watch(ctx, reqA)
		if err != nil {
			rt.Fatal(err)
		}
		defer live.Close()
		var leases []held
		secret := [32]byte{1}
		resources := []string{"a/x", "a/y", "b/x", "c/z"}
		keys := []string{"a/k", "b/k", "b/kk", "c/k"}
		ops := rapid.IntRange(1, 25).Draw(rt, "ops")
		for range ops {
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0: // acquire one or two resources
				res := []string{rapid.SampledFrom(resources).Draw(rt, "res")}
				if r2 := rapid.SampledFrom(resources).Draw(rt, "res2"); r2 != res[0] && rapid.Bool().Draw(rt, "two") {
					res = append(res, r2)
				}
				r, err := n.svc.Acquire(ctx, &service.AcquireRequest{RequestID: reqID(), Resources: res, TTL: time.Minute, SecretHash: secret, Owner: "o"})
				if err == nil {
					leases = append(leases, held{r.Lease.ID, secret})
				}
			case 1, 2: // release or renew one
				if len(leases) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(leases)-1).Draw(rt, "lease")
				if rapid.Bool().Draw(rt, "renew") {
					n.svc.Renew(ctx, &service.RenewRequest{RequestID: reqID(), LeaseID: leases[i].id, SecretHash: leases[i].secret})
				} else {
					n.svc.Release(ctx, &service.ReleaseRequest{RequestID: reqID(), LeaseID: leases[i].id, SecretHash: leases[i].secret})
					leases = append(leases[:i], leases[i+1:]...)
				}
			case 3:
				n.svc.Put(ctx, &service.PutRequest{RequestID: reqID(), Key: rapid.SampledFrom(keys).Draw(rt, "key"), Value: []byte("v")})
			case 4:
				n.svc.Delete(ctx, &service.DeleteRequest{RequestID: reqID(), Key: rapid.SampledFrom(keys).Draw(rt, "key")})
			case 5: // several changes in one entry
				var cmds []fsm.Command
				for range rapid.IntRange(2, 5).Draw(rt, "batch") {
					cmds = append(cmds, &fsm.Put{RequestID: reqID(), Key: rapid.SampledFrom(keys).Draw(rt, "key"), Value: []byte("b")})
				}
				n.node.ProposeAll(ctx, cmds)
			}
		}
		for _, l := range leases { // leave nothing to expire later
			n.svc.Release(ctx, &service.ReleaseRequest{RequestID: reqID(), LeaseID: l.id, SecretHash: l.secret})
		}
		// A last entry every watcher sees ends its reading.
		res, err := n.node.ProposeAll(ctx, []fsm.Command{
			&fsm.Put{RequestID: reqID(), Key: "a/end", Value: []byte("e")},
			&fsm.Put{RequestID: reqID(), Key: "b/kend", Value: []byte("e")},
			&fsm.Put{RequestID: reqID(), Key: "c/end", Value: []byte("e")}})
		if err != nil || res[0].Err != nil {
			rt.Fatalf("closing batch: %v %v", err, res)
		}
		last := res[0].Version() // a put's version is its log index

		sameEvents(t, "watcher started before", collect(t, live, last), n.rec.after(live.Start(), reqA))

		st := n.hub.Stats()
		from := rapid.Uint64Range(st.Oldest, last).Draw(rt, "from")
		reqB := service.WatchRequest{Prefixes: rapid.SampledFrom(prefixSets).Draw(rt, "past prefixes"),
			Renewed: rapid.Bool().Draw(rt, "past renewed"), From: from}
		past, err := n.svc.Watch(ctx, reqB)
		if err != nil {
			rt.Fatal(err)
		}
		defer past.Close()
		sameEvents(t, fmt.Sprintf("watcher from %d", from), collect(t, past, last), n.rec.after(from, reqB))
	})
}

// TestWatchFromTooOldAnIndexNamesTheOldest: once the ring has dropped
// events, a watch from before them fails with out_of_range naming the
// oldest index a watch can resume from, and a watch from that index gets
// everything after it.
func TestWatchFromTooOldAnIndexNamesTheOldest(t *testing.T) {
	n := startWatchNode(t, service.HubConfig{Events: 16})
	ctx := context.Background()
	var last uint64
	for i := range 40 {
		v, err := n.svc.Put(ctx, &service.PutRequest{RequestID: reqID(), Key: fmt.Sprintf("k/%d", i), Value: []byte("v")})
		if err != nil {
			t.Fatal(err)
		}
		last = v
	}
	oldest := n.hub.Stats().Oldest
	if oldest <= 1 {
		t.Fatalf("the ring of 16 kept everything after %d of 40 puts", oldest)
	}
	_, err := n.svc.Watch(ctx, service.WatchRequest{From: 1})
	if leasehold.CodeOf(err) != leasehold.CodeOutOfRange {
		t.Fatalf("watch from 1: %v, want out_of_range", err)
	}
	if want := fmt.Sprintf("the oldest index a watch can resume from is %d", oldest); !strings.Contains(err.Error(), want) {
		t.Fatalf("watch from 1: %q does not say %q", err, want)
	}
	w, err := n.svc.Watch(ctx, service.WatchRequest{From: oldest})
	if err != nil {
		t.Fatalf("watch from the oldest index %d: %v", oldest, err)
	}
	defer w.Close()
	sameEvents(t, "from the oldest", collect(t, w, last), n.rec.after(oldest, service.WatchRequest{}))
}

// TestSlowWatcherIsCutOffResumably: a watcher that never reads is cut off
// once it is MaxLag events behind, with a limit error naming the index to
// resume from, and a watch resumed there gets every later event.
func TestSlowWatcherIsCutOffResumably(t *testing.T) {
	n := startWatchNode(t, service.HubConfig{Events: 4000, MaxLag: 250})
	ctx := context.Background()
	slow, err := n.svc.Watch(ctx, service.WatchRequest{Now: true})
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for b := range 4 { // 4 entries of 100 puts: 400 events
		var cmds []fsm.Command
		for i := range 100 {
			cmds = append(cmds, &fsm.Put{RequestID: reqID(), Key: fmt.Sprintf("k/%d/%d", b, i), Value: []byte("v")})
		}
		res, err := n.node.ProposeAll(ctx, cmds)
		if err != nil {
			t.Fatal(err)
		}
		last = res[0].Version()
	}
	deadline := time.Now().Add(10 * time.Second)
	for slow.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	err = slow.Err()
	if leasehold.CodeOf(err) != leasehold.CodeLimit {
		t.Fatalf("a watcher 400 events behind (limit 250): %v, want a limit error", err)
	}
	var resume uint64
	if _, e := fmt.Sscanf(err.Error()[strings.LastIndex(err.Error(), "resume from index"):], "resume from index %d", &resume); e != nil {
		t.Fatalf("%q names no index to resume from: %v", err, e)
	}
	// What it had been handed before the cut is still read, up to resume.
	var got []service.Event
	for b := range slow.Batches() {
		if b.Index > resume {
			t.Fatalf("the cut-off watcher delivered index %d, past its resume index %d", b.Index, resume)
		}
		got = append(got, b.Events...)
	}
	w, err := n.svc.Watch(ctx, service.WatchRequest{From: resume})
	if err != nil {
		t.Fatalf("resume from %d: %v", resume, err)
	}
	defer w.Close()
	got = append(got, collect(t, w, last)...)
	sameEvents(t, "cut off and resumed", got, n.rec.after(slow.Start(), service.WatchRequest{}))
	if s := n.hub.Stats(); s.CutOff != 1 {
		t.Fatalf("cut-off count %d, want 1", s.CutOff)
	}
}

// TestHubMemoryStaysBoundedWithWatchersThatNeverRead feeds the hub a
// million events with ten watchers that never read: the ring keeps at most
// its configured count, the watchers are cut off, and the heap grows by
// about the ring's size, not the events'.
func TestHubMemoryStaysBoundedWithWatchersThatNeverRead(t *testing.T) {
	if testing.Short() {
		t.Skip("a million events")
	}
	hub := service.NewHub(service.HubConfig{Events: 100_000})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ws []*service.Watcher
	for range 10 {
		w, err := hub.Watch(ctx, service.WatchRequest{Now: true})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	value := []byte("0123456789abcdef0123456789abcdef") // 32 bytes per event
	const total = 1_000_000
	for i := range uint64(total) {
		hub.Event(fsm.Event{Index: i + 1, Kind: fsm.EventPut, Key: fmt.Sprintf("k/%d", i%1000), Value: value, Version: i + 1})
		hub.Applied(i + 1)
	}
	after := heap()
	grown := int64(after) - int64(before)
	t.Logf("heap: %d KiB before, %d KiB after %d events with 10 watchers that never read (grew %d KiB)", before>>10, after>>10, total, grown>>10)
	if s := hub.Stats(); s.Kept != 100_000 || s.Oldest != total-100_000 {
		t.Fatalf("ring keeps %d events from %d, want 100000 from %d", s.Kept, s.Oldest, total-100_000)
	}
	for i, w := range ws {
		if leasehold.CodeOf(w.Err()) != leasehold.CodeLimit {
			t.Fatalf("watcher %d that never read: %v, want cut off", i, w.Err())
		}
	}
	// The ring: 100,000 events of ~200 bytes with their keys.
	if limit := int64(64 << 20); grown > limit {
		t.Fatalf("heap grew %d MiB for a ring of 100,000 events; want under %d MiB", grown>>20, limit>>20)
	}
}

// TestWatchHistoryRestartsAtARestoredSnapshot: a node that restarts from a
// snapshot keeps no events before it; its history says so by its oldest
// index (a watch from before is out_of_range naming it), and a watch from
// that index gets every event after it.
func TestWatchHistoryRestartsAtARestoredSnapshot(t *testing.T) {
	dir := t.TempDir()
	n := startWatchNodeIn(t, dir, service.HubConfig{})
	ctx := context.Background()
	var snapAt uint64
	for i := range 10 {
		v, err := n.svc.Put(ctx, &service.PutRequest{RequestID: reqID(), Key: fmt.Sprintf("k/%d", i), Value: []byte("v")})
		if err != nil {
			t.Fatal(err)
		}
		snapAt = v
	}
	if err := n.node.Snapshot(); err != nil {
		t.Fatal(err)
	}
	n.node.Close()

	n = startWatchNodeIn(t, dir, service.HubConfig{})
	if got := n.hub.Stats().Oldest; got != snapAt {
		t.Fatalf("after restoring the snapshot at %d, the history's oldest index is %d", snapAt, got)
	}
	_, err := n.svc.Watch(ctx, service.WatchRequest{From: snapAt - 1})
	if leasehold.CodeOf(err) != leasehold.CodeOutOfRange || !strings.Contains(err.Error(), fmt.Sprintf("resume from is %d", snapAt)) {
		t.Fatalf("watch from before the snapshot: %v, want out_of_range naming %d", err, snapAt)
	}
	w, err := n.svc.Watch(ctx, service.WatchRequest{From: snapAt})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	last, err := n.svc.Put(ctx, &service.PutRequest{RequestID: reqID(), Key: "k/after", Value: []byte("v")})
	if err != nil {
		t.Fatal(err)
	}
	got := collect(t, w, last)
	sameEvents(t, "after the snapshot", got, n.rec.after(snapAt, service.WatchRequest{}))
	if len(got) != 1 || got[0].Key != "k/after" {
		t.Fatalf("after the snapshot: %+v, want the one put", got)
	}
}
