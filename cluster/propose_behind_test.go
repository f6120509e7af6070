package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/fsm"
)

// A proposal behind rides in the entry the next eager proposal starts;
// alone, it starts its own entry once its linger runs out (never sooner,
// and it is never left behind).
func TestProposeBehindRidesInTheNextEntryOrGoesAfterItsLinger(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.QueueLinger = 2 * time.Second // roomy: the eager proposal must come within it on a loaded machine
	n := openNode(t, cfg)
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := n.Propose(ctx, acquireCmd("holder", time.Minute, 0, "r")); err != nil {
		t.Fatal(err)
	}

	// Alone: it waits out its linger, then commits.
	start := time.Now()
	res, err := n.ProposeBehind(ctx, []fsm.Command{acquireCmd("alone", time.Minute, time.Minute, "r")})
	if err != nil || !res[0].Queued {
		t.Fatalf("alone: %+v %v", res, err)
	}
	if took := time.Since(start); took < cfg.QueueLinger {
		t.Errorf("a lone proposal behind committed after %v, before its linger of %v", took, cfg.QueueLinger)
	}

	// With company: it goes in the eager proposal's entry, at once.
	// The state's own last index: raft's AppliedIndex may lag the answer.
	applied := func() (ix uint64) { n.m.read(func(st *fsm.State) { ix = st.LastIndex() }); return ix }
	before := applied()
	behind := make(chan error, 1)
	go func() {
		res, err := n.ProposeBehind(ctx, []fsm.Command{acquireCmd("rider", time.Minute, time.Minute, "r")})
		if err == nil && !res[0].Queued {
			t.Errorf("the rider was not queued: %+v", res[0])
		}
		behind <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n.props.mu.Lock()
		queued := len(n.props.queue)
		n.props.mu.Unlock()
		if queued == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the rider did not queue within 10s")
		}
		time.Sleep(time.Millisecond)
	}
	start = time.Now()
	if _, err := n.Propose(ctx, acquireCmd("eager", time.Minute, 0, "other")); err != nil {
		t.Fatal(err)
	}
	if err := <-behind; err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= cfg.QueueLinger {
		t.Errorf("the rider took %v, as long as its linger: it did not ride", took)
	}
	if entries := applied() - before; entries != 1 {
		t.Errorf("the rider and the eager proposal took %d entries, want 1", entries)
	}
}
