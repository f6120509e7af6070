package integration

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cluster"

	"github.com/leasehold/leasehold/internal/testcluster"
)

// TestDamagedFollowerIsReplacedWithoutLoss: a follower's disk loses the
// end of its log. It refuses to start rather than rejoin with a shorter
// log; replaced as the README says (removed, its data dir emptied, started
// with join and added again) it catches up to the very same state; and
// after the leader is killed, the next token, from a new leader that
// raised its counter to its floor, is above every token answered.
func TestDamagedFollowerIsReplacedWithoutLoss(t *testing.T) {
	c := testcluster.Start(t, 3)
	lead := c.WaitLeader(10 * time.Second)
	victim := (lead + 1) % 3
	id := c.ID(victim)
	cl := newTestClient(t, time.Second, c.URLs()...)
	var maxToken uint64
	for i := range 10 {
		l, err := cl.Acquire(ctxFor(t, 10*time.Second), fmt.Sprintf("dmg/%d", i), client.TTL(time.Minute), client.ManualRenew())
		if err != nil {
			t.Fatal(err)
		}
		maxToken = max(maxToken, l.Token())
	}
	if err := c.WaitApplied(leaderIndex(t, c), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	cfg := c.Node(victim).Config
	c.Kill(victim)

	segs, err := filepath.Glob(filepath.Join(cfg.DataDir, "wal", "*.wal"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("segments of %s: %v %v", id, segs, err)
	}
	slices.Sort(segs)
	data, err := os.ReadFile(segs[len(segs)-1])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(segs[len(segs)-1], int64(len(strings.TrimRight(string(data), "\x00"))-200)); err != nil {
		t.Fatal(err)
	}
	var de *cluster.DamageError
	if n, err := cluster.Open(cfg, nil); err == nil {
		n.Close()
		t.Fatalf("%s started on a log that lost its end", id)
	} else if !errors.As(err, &de) {
		t.Fatalf("%s: %v, want a DamageError", id, err)
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
	c.Wipe(victim)
	c.StartJoining(victim)
	if err := cl.AddVoter(ctxFor(t, 40*time.Second), id, c.RaftAddr(victim)); err != nil {
		t.Fatalf("re-add %s: %v", id, err)
	}
	waitMembers(t, c, cl, 10*time.Second, c.ID(0), c.ID(1), c.ID(2))
	if err := c.WaitApplied(leaderIndex(t, c), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	waitSameState(t, c, 10*time.Second)

	lead = c.WaitLeader(10 * time.Second)
	c.Kill(lead)
	l, err := cl.Acquire(ctxFor(t, 20*time.Second), "dmg/after", client.TTL(time.Minute), client.ManualRenew())
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() <= maxToken {
		t.Fatalf("token %d after the replacement and a leader change, but %d was answered before", l.Token(), maxToken)
	}
}
