package integration

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/fsm"

	"github.com/leasehold/leasehold/internal/testcluster"
)

// TestWipedNodeCatchesUpBySnapshot: a follower is killed and its disk
// wiped; the leader writes enough entries to snapshot and compact its log;
// the node is removed and re-added, and it catches up through a snapshot
// install (the entries it would need are gone from the leader's log) to the
// very same state bytes.
func TestWipedNodeCatchesUpBySnapshot(t *testing.T) {
	const (
		threshold = 64
		trailing  = 32
	)
	var rejoining string // set before the wiped node starts again
	c := testcluster.Start(t, 3, func(cfg *cluster.Config) {
		cfg.SnapshotThreshold = threshold
		cfg.TrailingLogs = trailing
		cfg.SnapshotInterval = 200 * time.Millisecond
		cfg.WALSegmentSize = 64 << 10 // compacted entries go a segment at a time
		if cfg.Join && cfg.NodeID == rejoining {
			// The rejoining node never snapshots on its own, so any
			// snapshot in its data dir came from the leader.
			cfg.SnapshotThreshold = 1 << 40
			cfg.SnapshotInterval = time.Hour
		}
	})
	lead := c.WaitLeader(10 * time.Second)
	victim := (lead + 1) % 3
	cl := newTestClient(t, time.Second, c.URLs()...)

	// Leases held across the whole exercise, so the state is not empty.
	var held []*client.Lease
	for i := range 4 {
		l, err := cl.Acquire(ctxFor(t, 10*time.Second), fmt.Sprintf("snap/held/%d", i),
			client.TTL(time.Minute), client.ManualRenew(), client.Operation("held across the wipe"))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	t.Cleanup(func() {
		for _, l := range held {
			l.Release(ctxFor(t, 5*time.Second))
		}
	})

	c.Kill(victim)
	c.Wipe(victim)
	churn := func(n int, prefix string) {
		t.Helper()
		for i := range n {
			l, err := cl.Acquire(ctxFor(t, 10*time.Second), fmt.Sprintf("%s/%d", prefix, i%7), client.TTL(time.Minute), client.ManualRenew())
			if err != nil {
				t.Fatalf("churn acquire %d: %v", i, err)
			}
			if err := l.Release(ctxFor(t, 10*time.Second)); err != nil {
				t.Fatalf("churn release %d: %v", i, err)
			}
		}
	}
	churn(40, "snap/churn") // 80 entries: past the snapshot threshold
	// raft-wal only forgets compacted entries a whole segment at a time:
	// until the first segment is sealed and dropped, the leader can still
	// read index 1 and would send the whole log instead of a snapshot. So
	// write past a few (small) segments.
	lead = c.WaitLeader(10 * time.Second)
	ln := c.Node(lead)
	filled, took := fillLog(t, c, 1<<20)
	lead = c.WaitLeader(10 * time.Second)
	ln = c.Node(lead)
	t.Logf("wrote %d KiB of log in %v", filled>>10, took.Round(time.Millisecond))
	if err := ln.Cluster.Snapshot(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		t.Fatalf("leader snapshot: %v", err)
	}
	waitFor(t, 20*time.Second, "the leader's first WAL segment is dropped", func() (bool, string) {
		segs, _ := filepath.Glob(filepath.Join(ln.Config.DataDir, "wal", "*.wal"))
		for _, s := range segs {
			if strings.HasPrefix(filepath.Base(s), "00000000000000000001-") {
				// Compaction keeps the last TrailingLogs entries: add small
				// ones until the first segment lies wholly behind them.
				churn(trailing/2, "snap/trail")
				ln.Cluster.Snapshot()
				return false, fmt.Sprintf("segments %v", segs)
			}
		}
		return true, ""
	})
	var snapIndex uint64
	for _, m := range snapshots(t, ln.Config.DataDir) {
		snapIndex = max(snapIndex, m.Index)
	}
	last := ln.Cluster.LocalStatus().LastIndex
	// raft compacts the log up to min(snapshot, last-trailing) after a
	// snapshot: the entries from index 1 on are gone.
	firstKept := min(snapIndex, last-trailing) + 1
	if snapIndex == 0 || firstKept <= 1 {
		t.Fatalf("leader %s: snapshot at %d, last index %d: its log still holds index 1", c.ID(lead), snapIndex, last)
	}
	t.Logf("leader %s: snapshot at index %d, last index %d, log starts at about %d", c.ID(lead), snapIndex, last, firstKept)
	churn(10, "snap/tail") // entries after the snapshot, sent as log
	// Whoever leads when the node rejoins sends the snapshot: on a loaded
	// machine that may no longer be ln. Note where each survivor's log
	// starts now; the one that sends must send a snapshot that reaches it.
	firstKeptOf := map[int]uint64{}
	for i := range 3 {
		if i == victim {
			continue
		}
		var snap uint64
		for _, m := range snapshots(t, c.Node(i).Config.DataDir) {
			snap = max(snap, m.Index)
		}
		firstKeptOf[i] = min(snap, max(c.Node(i).Cluster.LocalStatus().LastIndex, trailing)-trailing) + 1
	}

	id := c.ID(victim)
	if err := cl.RemoveServer(ctxFor(t, 20*time.Second), id); err != nil {
		t.Fatalf("remove %s: %v", id, err)
	}
	var rest []string
	for i := range 3 {
		if i != victim {
			rest = append(rest, c.ID(i))
		}
	}
	waitMembers(t, c, cl, 10*time.Second, rest...)

	rejoining = id
	c.StartJoining(victim)
	joinStart := time.Now()
	if err := cl.AddVoter(ctxFor(t, 40*time.Second), id, c.RaftAddr(victim)); err != nil {
		t.Fatalf("re-add %s: %v", id, err)
	}
	waitMembers(t, c, cl, 10*time.Second, c.ID(0), c.ID(1), c.ID(2))
	if err := c.WaitApplied(leaderIndex(t, c), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	caughtUp := time.Since(joinStart)
	idx, size := waitSameState(t, c, 10*time.Second)

	installed := snapshots(t, c.Node(victim).Config.DataDir)
	if len(installed) == 0 {
		t.Fatalf("%s caught up with no snapshot in its data dir: it was not installed from the leader", id)
	}
	var inst snapshotMeta
	for _, m := range installed {
		if m.Index > inst.Index {
			inst = m
		}
	}
	instIndex := inst.Index
	sender := -1 // the survivor that holds the installed snapshot (the lower start if both do)
	for i := range firstKeptOf {
		for _, m := range snapshots(t, c.Node(i).Config.DataDir) {
			if m.Index == inst.Index && m.Term == inst.Term && (sender < 0 || firstKeptOf[i] < firstKeptOf[sender]) {
				sender = i
			}
		}
	}
	if sender < 0 {
		t.Fatalf("%s holds a snapshot at index %d, term %d that no other node holds", id, inst.Index, inst.Term)
	}
	if sender != lead {
		t.Logf("leadership moved from %s: %s sent the snapshot", c.ID(lead), c.ID(sender))
	}
	if instIndex < firstKeptOf[sender]-1 {
		t.Errorf("%s holds a snapshot at %d from %s, below that node's first log entry %d", id, instIndex, c.ID(sender), firstKeptOf[sender])
	}
	t.Logf("%s re-added and caught up in %v through a snapshot at index %d; every replica at index %d with identical state (%d bytes)",
		id, caughtUp.Round(time.Millisecond), instIndex, idx, size)

	// And it serves: a held lease is known through it.
	viaVictim := newTestClient(t, time.Second, c.URL(victim))
	got, err := viaVictim.Get(ctxFor(t, 10*time.Second), "snap/held/0")
	if err != nil {
		t.Fatal(err)
	}
	if got.Holder == nil || got.Holder.Token != held[0].Token() {
		t.Errorf("Get through the rejoined node: holder %v, want token %d", got.Holder, held[0].Token())
	}
}

// fillLog proposes acquires that the state machine refuses (an owner name
// far over its limit, so each costs a length check) but that still travel
// through the log, until about size bytes went in. The state barely grows.
// (The API edge refuses such requests; only a test can propose them.)
// Proposals go to whichever node leads; one that fails is retried.
func fillLog(t *testing.T, c *testcluster.Cluster, size int) (int, time.Duration) {
	t.Helper()
	const per = 256 << 10
	start := time.Now()
	owner := strings.Repeat("o", per)
	count := size / per
	var next atomic.Int64
	var wg sync.WaitGroup
	var retries atomic.Int64
	errs := make(chan error, 2)
	deadline := time.Now().Add(60 * time.Second)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(count) {
					return
				}
				cmd := &fsm.Acquire{RequestID: fmt.Sprintf("fill-%d", i), Resources: []string{"snap/fill"}, Owner: owner, TTL: time.Minute}
				for {
					if time.Now().After(deadline) {
						errs <- fmt.Errorf("filling the log took over 60s")
						return
					}
					var n *testcluster.Node
					if l := c.Leader(); l >= 0 {
						n = c.Node(l)
					}
					if n == nil {
						time.Sleep(20 * time.Millisecond)
						continue
					}
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					res, err := n.Cluster.Propose(ctx, cmd)
					cancel()
					if err != nil {
						retries.Add(1) // same request ID: a retry never applies twice
						time.Sleep(20 * time.Millisecond)
						continue
					}
					if !errors.Is(res.Err, leasehold.ErrInvalid) {
						errs <- fmt.Errorf("filler acquire %d: %v, want invalid", i, res.Err)
						return
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if r := retries.Load(); r > 0 {
		t.Logf("filling the log: %d proposals retried", r)
	}
	return count * per, time.Since(start)
}
