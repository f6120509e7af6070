package integration

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cluster"

	"github.com/leasehold/leasehold/internal/testcluster"
	"github.com/leasehold/leasehold/internal/walfile"
)

// TestDamagedFollowerIsRebuiltWithoutLoss: a follower's disk zeroes a
// frame header in the middle of its log. It refuses to start rather than
// rejoin with a shorter log. It is rebuilt as the README says — removed
// from the cluster, then either its data dir emptied or `recover`ed,
// started with join and added again — and catches up to the very same
// state, every acknowledged lease in it; after the leader is killed, the
// next token, from a new leader that raised its counter to its floor, is
// above every token answered.
func TestDamagedFollowerIsRebuiltWithoutLoss(t *testing.T) {
	for _, rebuild := range []string{"wiped", "recovered"} {
		t.Run(rebuild, func(t *testing.T) {
			c := testcluster.Start(t, 3)
			lead := c.WaitLeader(10 * time.Second)
			victim := (lead + 1) % 3
			id := c.ID(victim)
			cl := newTestClient(t, time.Second, c.URLs()...)
			var maxToken uint64
			var held []string
			for i := range 20 {
				res := fmt.Sprintf("dmg/%d", i)
				l, err := cl.Acquire(ctxFor(t, 10*time.Second), res, client.TTL(time.Hour), client.ManualRenew())
				if err != nil {
					t.Fatal(err)
				}
				maxToken = max(maxToken, l.Token())
				held = append(held, res)
			}
			if err := c.WaitApplied(leaderIndex(t, c), 10*time.Second); err != nil {
				t.Fatal(err)
			}
			cfg := c.Node(victim).Config
			c.Kill(victim)
			zeroMidFrameHeader(t, cfg.DataDir)
			var de *cluster.DamageError
			if n, err := cluster.Open(cfg, nil); err == nil {
				n.Close()
				t.Fatalf("%s started on a log with a zeroed frame header", id)
			} else if !errors.As(err, &de) || de.Lost() == 0 {
				t.Fatalf("%s: %v, want a DamageError that names entries lost", id, err)
			}

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
			if rebuild == "wiped" {
				c.Wipe(victim)
			} else if plan, err := cluster.Recover(cfg.DataDir, func(p *cluster.RecoveryPlan) bool { return len(p.Voters) == 3 }); err != nil || plan.Damage == nil {
				t.Fatalf("recover %s: %+v %v", id, plan, err)
			}
			c.StartJoining(victim)
			if err := cl.AddVoter(ctxFor(t, 40*time.Second), id, c.RaftAddr(victim)); err != nil {
				t.Fatalf("re-add %s: %v", id, err)
			}
			waitMembers(t, c, cl, 10*time.Second, c.ID(0), c.ID(1), c.ID(2))
			if err := c.WaitApplied(leaderIndex(t, c), 20*time.Second); err != nil {
				t.Fatal(err)
			}
			waitSameState(t, c, 10*time.Second)
			for _, res := range held {
				r, err := cl.Get(ctxFor(t, 10*time.Second), res)
				if err != nil || holderID(r) == 0 {
					t.Errorf("acknowledged lease on %s is gone from the cluster: %+v %v", res, r, err)
				}
			}

			lead = c.WaitLeader(10 * time.Second)
			c.Kill(lead)
			l, err := cl.Acquire(ctxFor(t, 20*time.Second), "dmg/after", client.TTL(time.Minute), client.ManualRenew())
			if err != nil {
				t.Fatal(err)
			}
			if l.Token() <= maxToken {
				t.Fatalf("token %d after the rebuild and a leader change, but %d was answered before", l.Token(), maxToken)
			}
		})
	}
}

// zeroMidFrameHeader zeroes the header of an entry frame in the middle of
// the last segment of dataDir's log.
func zeroMidFrameHeader(t *testing.T, dataDir string) {
	t.Helper()
	seg, err := walfile.LastSegment(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := walfile.Entries(seg)
	if err == nil {
		err = walfile.WriteAt(seg, entries[len(entries)/2].Offset, make([]byte, walfile.FrameHeaderLen))
	}
	if err != nil {
		t.Fatal(err)
	}
}
