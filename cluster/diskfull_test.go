package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fsm"
	"github.com/leasehold/leasehold/internal/smalldisk"

	"github.com/leasehold/leasehold/internal/testutil"
)

// A node whose disk fills up stops at its first failed log write instead
// of wedging: it acknowledges nothing more, says why (Ready, every
// request), and once space is back a restart on the same data dir has
// every acknowledged lease, and the next token is larger than any issued.
// Two ways to run out: an append that does not fit (the last batch of a
// segment is written past its preallocated end), and a new segment that
// does not fit (raft-wal's background rotation fails; the next append
// finds the segment sealed).
func TestDiskFullStopsNodeAndRestartKeepsAcknowledged(t *testing.T) {
	t.Run("append", func(t *testing.T) { testDiskFull(t, 0) })
	t.Run("rotation", func(t *testing.T) { testDiskFull(t, 256<<10) })
}

// testDiskFull fills the disk but for leave bytes (less than a segment).
func testDiskFull(t *testing.T, leave int64) {
	dir := smalldisk.Mount(t, 16<<20)
	cfg := testConfig(t, dir)
	cfg.WALSegmentSize = 1 << 20 // rotations come often, as on a busy node
	if testing.Verbose() {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	n := openNode(t, cfg)
	defer func() { n.Close() }()
	ctx := context.Background()

	acked := map[string]uint64{} // resource -> token of an acknowledged grant
	var maxToken uint64
	seq := 0
	meta := map[string]string{"pad": strings.Repeat("x", 3<<10)} // fills segments fast
	acquire := func(n *Node) error {
		cmds := make([]fsm.Command, 8)
		for i := range cmds {
			seq++
			a := acquireCmd(fmt.Sprint("a", seq), time.Hour, 0, fmt.Sprint("r", seq))
			a.Metadata = meta
			cmds[i] = a
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		res, err := n.ProposeAll(cctx, cmds)
		if err != nil {
			return err
		}
		for i, r := range res {
			if r.Err != nil || r.Lease == nil {
				t.Fatalf("acquire %v: %+v", cmds[i].(*fsm.Acquire).Resources, r)
			}
			acked[r.Lease.Resources[0]] = r.Lease.Token
			maxToken = max(maxToken, r.Lease.Token)
		}
		return nil
	}
	for range 10 {
		if err := acquire(n); err != nil {
			t.Fatal(err)
		}
	}

	free := smalldisk.Fill(t, dir, leave)
	t.Logf("filled the disk: %d bytes free", smalldisk.Free(t, dir))
	var werr error
	for deadline := time.Now().Add(60 * time.Second); werr == nil; {
		if time.Now().After(deadline) {
			t.Fatalf("every acquire still succeeds on a full disk (%d acknowledged)", len(acked))
		}
		werr = acquire(n)
	}
	t.Logf("%d acquires acknowledged; the first refused: %v", len(acked), werr)
	if leasehold.CodeOf(werr) != leasehold.CodeUnavailable {
		t.Errorf("refused acquire: code %v, want unavailable: %v", leasehold.CodeOf(werr), werr)
	}

	// The node has stopped, and says why, until it is restarted.
	checkFor(t, 10*time.Second, func() error {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		err := n.Ready(rctx)
		if err == nil || !strings.Contains(err.Error(), "disk full") || !strings.Contains(err.Error(), dir) {
			return fmt.Errorf("Ready = %v, want an error naming the full disk and %s", err, dir)
		}
		return nil
	})
	select {
	case <-n.Failed():
	default:
		t.Fatal("Failed() is not closed")
	}
	if !errors.Is(n.Fault(), ErrDiskFull) {
		t.Errorf("Fault() = %v, want ErrDiskFull", n.Fault())
	}
	before := len(acked)
	err := acquire(n)
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("acquire on the stopped node: %v, want a refusal naming the full disk", err)
	}
	if len(acked) != before {
		t.Fatalf("the stopped node acknowledged an acquire")
	}
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := n.Read(rctx, func(*fsm.State) {}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("read on the stopped node: %v, want a refusal naming the full disk", err)
	}

	if err := n.Close(); err != nil {
		t.Logf("close after the fault: %v", err)
	}
	// Still full: reopening fails at once, saying so.
	if n2, err := Open(cfg, nil); !errors.Is(err, ErrDiskFull) || !strings.Contains(fmt.Sprint(err), dir) {
		if err == nil {
			n2.Close()
		}
		t.Fatalf("reopening on the full disk: %v, want ErrDiskFull naming %s", err, dir)
	}
	free()
	n = openNode(t, cfg)
	var missing []string
	if err := n.Read(ctx, func(s *fsm.State) {
		for res, tok := range acked {
			if l, ok := s.Holder(res); !ok || l.Token != tok {
				missing = append(missing, res)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d acknowledged leases lost after the restart, e.g. %s", len(missing), len(acked), missing[0])
	}
	r, err := n.Propose(ctx, acquireCmd("after-restart", time.Hour, 0, "after"))
	if err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	if r.Lease.Token <= maxToken {
		t.Fatalf("token after the restart %d is not above %d, the largest issued", r.Lease.Token, maxToken)
	}
}

// checkFor polls f until it returns nil, and fails the test with f's last
// error if that takes longer than timeout.
func checkFor(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	testutil.Eventually(t, timeout, "still failing", f)
}

// TestDiskFullEveryProposerReturns: proposals racing the fault all get an
// answer, and the node closes. raft never answers a proposal it queued
// just before it shut down, so a proposer could wait forever.
func TestDiskFullEveryProposerReturns(t *testing.T) {
	dir := smalldisk.Mount(t, 16<<20)
	cfg := testConfig(t, dir)
	cfg.WALSegmentSize = 1 << 20
	n := openNode(t, cfg)
	t.Cleanup(func() { n.Close() }) // ends the proposers if the test fails
	meta := map[string]string{"pad": strings.Repeat("x", 3<<10)}
	const proposers = 16
	done := make(chan error, proposers)
	var granted atomic.Int64
	for p := range proposers {
		go func() {
			for i := 0; ; i++ {
				a := acquireCmd(fmt.Sprint("p", p, "-", i), time.Hour, 0, fmt.Sprint("p", p, "-", i))
				a.Metadata = meta
				if _, err := n.Propose(context.Background(), a); err != nil {
					done <- err
					return
				}
				granted.Add(1)
			}
		}()
	}
	checkFor(t, 30*time.Second, func() error {
		if granted.Load() < 50 {
			return fmt.Errorf("%d proposals granted before the disk filled, want 50", granted.Load())
		}
		return nil
	})
	smalldisk.Fill(t, dir, 0)
	timeout := time.After(30 * time.Second)
	for range proposers {
		select {
		case err := <-done:
			if leasehold.CodeOf(err) != leasehold.CodeUnavailable {
				t.Errorf("proposal refused with %v, want unavailable", err)
			}
		case <-timeout:
			t.Fatal("a proposer never got an answer after the fault")
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- n.Close() }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return after the fault")
	}
}

// TestDiskFullForTheTokenFloorStopsNode: when the disk fills while the WAL
// segment in use still has room (raft-wal preallocates it), the first write
// to fail is the token floor's. The node stops as on a failed log write,
// so a leader cannot keep leading while it refuses every token answer.
func TestDiskFullForTheTokenFloorStopsNode(t *testing.T) {
	dir := smalldisk.Mount(t, 16<<20)
	cfg := testConfig(t, dir)
	cfg.WALSegmentSize = 8 << 20 // appends after the fill go into this segment
	n := openNode(t, cfg)
	t.Cleanup(func() { n.Close() })
	ctx := context.Background()
	seq := 0
	acquire := func() error {
		cmds := make([]fsm.Command, 64)
		for i := range cmds {
			seq++
			cmds[i] = acquireCmd(fmt.Sprint("f", seq), time.Hour, 0, fmt.Sprint("f", seq))
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		res, err := n.ProposeAll(cctx, cmds)
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Err != nil {
				return r.Err
			}
		}
		return nil
	}
	if err := acquire(); err != nil {
		t.Fatal(err)
	}
	smalldisk.Fill(t, dir, 0)
	var werr error
	for deadline := time.Now().Add(60 * time.Second); werr == nil; {
		if time.Now().After(deadline) {
			t.Fatalf("%d tokens granted on a full disk, past any token floor step", seq)
		}
		werr = acquire()
	}
	t.Logf("the first refusal after %d acquires: %v", seq, werr)
	if leasehold.CodeOf(werr) != leasehold.CodeUnavailable {
		t.Errorf("refused acquire: code %v, want unavailable: %v", leasehold.CodeOf(werr), werr)
	}
	checkFor(t, 10*time.Second, func() error {
		if err := n.Fault(); !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "token floor") {
			return fmt.Errorf("Fault() = %v, want ErrDiskFull naming the token floor", err)
		}
		return nil
	})
	select {
	case <-n.Failed():
	default:
		t.Fatal("Failed() is not closed")
	}
	if n.IsLeader() {
		t.Fatal("the node still leads after its token floor could not be saved")
	}
}
