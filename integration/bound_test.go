package integration

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/fsm"
	"github.com/leasehold/leasehold/internal/testcluster"
)

// eventLog is an fsm.Observer that keeps every change event.
type eventLog struct{ events []fsm.Event }

func (*eventLog) Granted(*leasehold.Lease, string)        {}
func (*eventLog) Renewed(*leasehold.Lease, time.Duration) {}
func (*eventLog) Ended(*leasehold.Lease, fsm.EndReason)   {}
func (*eventLog) Queued(string, time.Duration)            {}
func (*eventLog) WaitEnded(string, fsm.Result)            {}
func (*eventLog) Blocked(string, uint64, time.Duration)   {}
func (l *eventLog) Event(e fsm.Event)                     { l.events = append(l.events, e) }

// replayEvents reads the raft log a stopped node wrote in dataDir and
// applies it to a fresh state, returning the change events with the log
// index of the entry that made each: what the node itself applied.
func replayEvents(t testing.TB, dataDir string) []fsm.Event {
	t.Helper()
	meta := &metadb.BoltMetaDB{}
	defer meta.Close()
	w, err := raftwal.Open(filepath.Join(dataDir, "wal"), raftwal.WithMetaStore(meta))
	if err != nil {
		t.Fatalf("open the node's log: %v", err)
	}
	defer w.Close()
	first, _ := w.FirstIndex()
	last, _ := w.LastIndex()
	if first != 1 {
		t.Fatalf("the node's log starts at %d (a snapshot compacted it): cannot replay it whole", first)
	}
	rec := &eventLog{}
	st := fsm.New(fsm.DefaultConfig(), rec)
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := w.GetLog(i, &l); err != nil {
			t.Fatalf("read log entry %d: %v", i, err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		b, err := fsm.DecodeBatch(l.Data)
		if err != nil {
			t.Fatalf("decode log entry %d: %v", i, err)
		}
		st.Apply(l.Index, b)
	}
	return rec.events
}

// TestBoundKeysEndWithTheirLease binds keys to three leases through the
// API and ends one lease each way: released, expired, forced. Through the
// API the keys are gone and the unbound ones stay; a watcher sees each
// key's deletion at the very index that ended its lease, and so does the
// node's own log.
func TestBoundKeysEndWithTheirLease(t *testing.T) {
	dir := t.TempDir()
	n := testcluster.StartNode(t, dir)
	cl := newTestClient(t, 2*time.Second, n.URL)
	ctx := ctxFor(t, 60*time.Second)

	acquire := func(resource string, opts ...client.Option) *client.Lease {
		l, err := cl.Acquire(ctx, resource, opts...)
		if err != nil {
			t.Fatalf("acquire %s: %v", resource, err)
		}
		return l
	}
	released := acquire("svc/released", client.TTL(time.Minute))
	expired := acquire("svc/expired", client.TTL(time.Second), client.ManualRenew())
	forced := acquire("svc/forced", client.TTL(time.Minute))
	bound := map[uint64][]string{}
	for _, l := range []*client.Lease{released, expired, forced} {
		for i := range 2 {
			key := fmt.Sprintf("alive/%s/%d", l.Resources()[0], i)
			if _, err := cl.Put(ctx, key, []byte("10.0.0.1:80"), client.BindLease(l)); err != nil {
				t.Fatalf("bound put %s: %v", key, err)
			}
			info, err := cl.GetKeyInfo(ctx, key)
			if err != nil || info.LeaseID != l.ID() {
				t.Fatalf("get %s: %+v (%v), want bound to lease %d", key, info, err, l.ID())
			}
			bound[l.ID()] = append(bound[l.ID()], key)
		}
	}
	// A key bound and then rewritten without a lease is unbound: it stays.
	if _, err := cl.Put(ctx, "alive/rebound", nil, client.BindLease(released)); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Put(ctx, "alive/rebound", []byte("plain")); err != nil {
		t.Fatal(err)
	}
	// A key a transaction binds ends with its lease too.
	res, err := cl.Txn(ctx).If(client.Absent("alive/txn")).
		Then(client.OpPut("alive/txn", nil, client.BindLease(forced)), client.OpPut("plain/txn", nil)).Commit()
	if err != nil || !res.Succeeded {
		t.Fatalf("bound txn: %+v (%v)", res, err)
	}
	bound[forced.ID()] = append(bound[forced.ID()], "alive/txn")

	alive := func() map[string]uint64 {
		out := map[string]uint64{}
		for k, err := range cl.Keys(ctx, "alive/") {
			if err != nil {
				t.Fatalf("list alive/: %v", err)
			}
			out[k.Key] = k.LeaseID
		}
		return out
	}
	if got := alive(); len(got) != 8 || got["alive/rebound"] != 0 || got["alive/txn"] != forced.ID() {
		t.Fatalf("alive/ lists %v: want 8 keys, alive/txn bound to lease %d, alive/rebound unbound", got, forced.ID())
	}

	// A watcher of both prefixes must see each lease end and its keys'
	// deletions at one log index. It starts from the node's first entry:
	// the 1s lease may have expired already on a loaded machine.
	w := cl.Watch(ctx, []string{"svc/", "alive/"}, client.FromIndex(0))

	if err := released.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	if _, err := cl.ForceRelease(ctx, "svc/forced", forced.ID(), "test"); err != nil {
		t.Fatalf("force release: %v", err)
	}
	gone := func(key string) bool {
		_, err := cl.GetKeyInfo(ctx, key)
		return errors.Is(err, leasehold.ErrNotFound)
	}
	waitFor(t, 20*time.Second, "the expired lease's keys are deleted", func() (bool, string) {
		return gone(bound[expired.ID()][0]) && gone(bound[expired.ID()][1]), "still there"
	})
	for id, keys := range bound {
		for _, k := range keys {
			if !gone(k) {
				t.Errorf("%s outlived lease %d", k, id)
			}
		}
	}
	if got := alive(); len(got) != 1 {
		t.Errorf("alive/ lists %v after every lease ended, want only alive/rebound", got)
	}
	for _, k := range []string{"alive/rebound", "plain/txn"} {
		if gone(k) {
			t.Errorf("%s, not bound, was deleted", k)
		}
	}

	watchedEnd := map[uint64]client.Event{}
	watchedDel := map[string]client.Event{}
	for deadline := time.After(20 * time.Second); len(watchedEnd) < 3 || len(watchedDel) < 7; {
		select {
		case e, ok := <-w.Events():
			if !ok {
				t.Fatalf("the watch ended: %v", w.Err())
			}
			switch e.Kind {
			case "released", "expired", "force_released":
				watchedEnd[e.LeaseID] = e
			case "deleted":
				watchedDel[e.Key] = e
			}
		case <-deadline:
			t.Fatalf("watched %d lease ends and %d deletions in 20s, want 3 and 7", len(watchedEnd), len(watchedDel))
		}
	}
	for id, keys := range bound {
		end := watchedEnd[id]
		for _, k := range keys {
			if d := watchedDel[k]; d.Index != end.Index || d.LeaseID != id {
				t.Errorf("watched %s deleted at %d (lease %d); want index %d, where lease %d %s", k, d.Index, d.LeaseID, end.Index, id, end.Kind)
			}
		}
	}

	n.Stop()
	ended := map[uint64]fsm.Event{}
	deleted := map[string]fsm.Event{}
	for _, e := range replayEvents(t, dir) {
		switch e.Kind {
		case fsm.EventReleased, fsm.EventExpired, fsm.EventForceReleased:
			ended[e.LeaseID] = e
		case fsm.EventDeleted:
			deleted[e.Key] = e
		}
	}
	for l, want := range map[*client.Lease]fsm.EventKind{released: fsm.EventReleased, expired: fsm.EventExpired, forced: fsm.EventForceReleased} {
		end, ok := ended[l.ID()]
		if !ok || end.Kind != want {
			t.Errorf("lease %d ended with %+v, want %v", l.ID(), end, want)
			continue
		}
		for _, k := range bound[l.ID()] {
			d, ok := deleted[k]
			if !ok || d.Index != end.Index || d.LeaseID != l.ID() {
				t.Errorf("%s: deletion %+v; want it at index %d, where lease %d %v", k, d, end.Index, l.ID(), end.Kind)
			}
		}
		t.Logf("lease %d %v at index %d with its keys %v", l.ID(), end.Kind, end.Index, bound[l.ID()])
	}
	if d, ok := deleted["alive/rebound"]; ok {
		t.Errorf("the unbound key was deleted: %+v", d)
	}
}
