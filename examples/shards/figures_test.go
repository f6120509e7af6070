package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/groups"
	"github.com/leasehold/leasehold/internal/testutil"
)

// The closing note's figures, measured on real processes. Not part of
// the suite (SHARDS_FIGURES=1 runs them): they take minutes and only
// print numbers.
//
//	SHARDS_FIGURES=1 go test -count=1 -run TestFigures -v ./examples/shards/

func figures(t *testing.T) *env {
	if os.Getenv("SHARDS_FIGURES") == "" {
		t.Skip("set SHARDS_FIGURES=1 to measure the figures")
	}
	return newEnv(t)
}

// Hand-off time: a member SIGKILLed, until each of its partitions is owned
// again by another member (the workers' own logs), over 5 runs.
func TestFiguresHandOff(t *testing.T) {
	e := figures(t)
	for _, m := range []string{"a", "b", "c"} {
		e.start(m)
	}
	e.settled(3, 60*time.Second)
	var perRun, all []time.Duration
	for run := range 5 {
		victim := fmt.Sprintf("v%d", run)
		e.start(victim)
		e.settled(4, 60*time.Second)
		time.Sleep(time.Second) // a few writes under the new assignment
		term, killed := e.term(), time.Now()
		if err := e.workers[victim].Kill(); err != nil {
			t.Fatal(err)
		}
		e.waitHandedOff(victim, killed)
		hs := e.handOffs(victim, killed, term)
		all = append(all, hs...)
		perRun = append(perRun, slices.Max(hs))
		e.settled(3, 60*time.Second)
	}
	slices.Sort(perRun)
	slices.Sort(all)
	t.Logf("hand-off (member SIGKILLed -> all its partitions owned by others), TTL %v, 5 runs: median %v, max %v; per run %v",
		ttl, perRun[len(perRun)/2].Round(time.Millisecond), perRun[len(perRun)-1].Round(time.Millisecond), sorted(perRun))
	t.Logf("per partition (%d): median %v, max %v", len(all), all[len(all)/2].Round(time.Millisecond), all[len(all)-1].Round(time.Millisecond))
}

// Rebalance: 10 members (groups.Run in this process, through the API of a
// 3-node cluster) join a group of 1,024 partitions at once: time until
// every partition is owned and no revocation is pending; then 10 more join
// the 10 (a rebalance that must revoke half of the partitions).
func TestFiguresRebalance(t *testing.T) {
	e := figures(t)
	ctx := testutil.Context(t, 5*time.Minute)
	if _, err := e.c.CreateGroup(ctx, "big", 1024); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	rctx, cancel := context.WithCancel(ctx)
	defer func() { cancel(); wg.Wait() }()
	join := func(from, to int) time.Duration {
		start := time.Now()
		for i := from; i < to; i++ {
			wg.Go(func() {
				groups.Run(rctx, e.c, "big", "m"+strconv.Itoa(i), func(ctx context.Context, _ int, _ uint64) error {
					<-ctx.Done()
					return nil
				}, groups.TTL(10*time.Second))
			})
		}
		testutil.Eventually(t, 2*time.Minute, "1,024 partitions owned, balanced", func() bool {
			g, err := e.c.Group(ctx, "big")
			if err != nil || g.Unowned != 0 || g.PendingRevocations != 0 || g.Members != to {
				return false
			}
			lo, hi := 1<<30, 0
			for _, m := range g.MemberList {
				lo, hi = min(lo, len(m.Partitions)), max(hi, len(m.Partitions))
			}
			return hi-lo <= 1
		})
		return time.Since(start)
	}
	first := join(0, 10)
	second := join(10, 20)
	t.Logf("rebalance, 1,024 partitions: 10 members join an empty group at once: %v; 10 more join those 10: %v",
		first.Round(time.Millisecond), second.Round(time.Millisecond))
}

// Memory: the RSS of every serve process before and after 100 groups of
// 1,024 partitions, then after 2,000 members in 100 groups of one
// partition (sessions with a 1h TTL, renewed by hand, so nothing else
// runs). RSS includes what the commands leave beside the state: the raft
// log's pages, the watch history.
func TestFiguresMemory(t *testing.T) {
	e := figures(t)
	ctx := testutil.Context(t, 5*time.Minute)
	base := e.rss()
	const ngroups, nparts = 100, 1024
	for i := range ngroups {
		if _, err := e.c.CreateGroup(ctx, "mem-"+strconv.Itoa(i), nparts); err != nil {
			t.Fatal(err)
		}
	}
	// The members join groups of one partition, so that a join moves
	// nothing and the figure is the session's own cost.
	for i := range ngroups {
		if _, err := e.c.CreateGroup(ctx, "solo-"+strconv.Itoa(i), 1); err != nil {
			t.Fatal(err)
		}
	}
	withParts := e.rss()
	const nmembers = 2000
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	var mu sync.Mutex
	var ms []*client.Membership
	for i := range nmembers {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			m, err := e.c.Join(ctx, "solo-"+strconv.Itoa(i%ngroups), "m"+strconv.Itoa(i), client.TTL(time.Hour), client.ManualRenew())
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			ms = append(ms, m)
			mu.Unlock()
		})
	}
	wg.Wait()
	withMembers := e.rss()
	for i := range base {
		t.Logf("node %d RSS: %d MiB at start; +%d B per partition (%d partitions in %d groups); +%d B per member (%d members in groups of one partition)",
			i+1, base[i]>>20, (withParts[i]-base[i])/(ngroups*nparts), ngroups*nparts, ngroups,
			(withMembers[i]-withParts[i])/nmembers, nmembers)
	}
}

// rss is each serve process's resident set size in bytes, read after a
// pause so that the last commands are applied everywhere.
func (e *env) rss() []int64 {
	time.Sleep(2 * time.Second)
	var out []int64
	for _, n := range e.nodes {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.Pid()))
		if err != nil {
			e.t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				out = append(out, kb<<10)
			}
		}
	}
	return out
}
