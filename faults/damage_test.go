package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/walfile"
)

// A damageCase damages a segment file on purpose and says what it did.
type damageCase struct {
	name   string
	damage func(segment string) (string, error)
}

// TestLogDamage stops a single node, damages its log, and acts as its
// operator: start it; if it refuses, run `leasehold recover --data-dir D
// --yes` (which keeps the good prefix) and start it again. A node alone
// cannot get back entries its disk lost, so acknowledged writes may be
// lost here, but only when the node refused to start and recover said it
// loses entries: a node that starts on a damaged log as if it were
// shorter (as one did on a zeroed frame header mid-segment) fails. What
// must stay 0 is tokens reused (the next grants above every token ever
// answered), stale and unauthorized writes accepted.
func TestLogDamage(t *testing.T) {
	for _, sc := range []damageCase{
		{"damage-tail", truncateTail},
		{"damage-middle", flipMiddle},
		{"damage-header", zeroFrameHeader},
	} {
		t.Run(sc.name, func(t *testing.T) {
			h := &history{}
			n := newNode(t, "n1", "")
			c := newClient(t, "", n.url)
			lossSaid, err := damageScenario(t, n, h, sc.name, sc.damage)
			if err != nil && (n.p == nil || n.p.Exited()) {
				c = nil // nothing to read the state back from
			}
			finish(t, sc.name, h, c, expect{lostAllowed: lossSaid}, err)
		})
	}
}

// TestFollowerLogDamage damages a follower's log in a 3-node cluster. The
// operator's path is the README's for a member: start it; if it refuses,
// remove it from the cluster, run `leasehold recover --removed --yes` and
// start it with --join (it asks to be added again). The cluster still
// holds every acknowledged write: none may be lost, and the follower must
// serve again.
func TestFollowerLogDamage(t *testing.T) {
	cases := []damageCase{{"damage-follower-header", zeroFrameHeader}}
	if full {
		cases = append(cases, damageCase{"damage-follower-tail", truncateTail}, damageCase{"damage-follower-middle", flipMiddle})
	}
	for _, sc := range cases {
		t.Run(sc.name, func(t *testing.T) {
			h := &history{}
			nodes := startCluster(t, 3)
			c := newClient(t, "", urls(nodes)...)
			err := followerDamage(t, nodes, c, h, sc.name, sc.damage)
			finish(t, sc.name, h, c, expect{}, err)
		})
	}
}

func followerDamage(t *testing.T, nodes []*node, c *client.Client, h *history, prefix string, damage func(string) (string, error)) error {
	w := startWorkload(c, h, prefix, 2)
	defer w.stop()
	if err := w.waitAcks(int64(rounds(40, 400)), progressTimeout); err != nil {
		return fmt.Errorf("before the damage: %w", err)
	}
	l, err := leader(nodes, c)
	if err != nil {
		return err
	}
	f := nodes[0]
	if f == l {
		f = nodes[1]
	}
	what, err := killAndDamage(f, damage)
	if err != nil {
		return err
	}
	t.Logf("damaged follower %s's log: %s", f.id, what)
	if err := w.waitAcks(6, progressTimeout); err != nil {
		return fmt.Errorf("while follower %s was down: %w", f.id, err)
	}
	if err := f.start(); err != nil {
		t.Logf("the follower did not start on the damaged log: %v", err)
		if err := rebuildMember(t, f, c, l); err != nil {
			return err
		}
	}
	if err := w.waitAcks(6, progressTimeout); err != nil {
		return fmt.Errorf("after follower %s came back: %w", f.id, err)
	}
	w.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = caughtUp(ctx, f, c)
	if err != nil {
		return err
	}
	h.nextPhase()
	return regrant(ctx, newClient(t, "", f.url), h, prefix)
}

// rebuildMember rebuilds member f of a cluster whose data dir is damaged,
// as the README says: remove it from the cluster (so that, its log
// shorter than its vote promised, it cannot help elect a leader lacking
// acknowledged entries), `leasehold recover --removed --yes`, and start it
// with --join through via (it asks to be added again).
func rebuildMember(t *testing.T, f *node, c *client.Client, via *node) error {
	f.p.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.RemoveServer(ctx, f.id); err != nil {
		return fmt.Errorf("remove %s: %w", f.id, err)
	}
	if out, err := runLH(time.Minute, "recover", "--data-dir", f.dataDir, "--yes"); err == nil || !strings.Contains(out, "--removed") {
		return fmt.Errorf("recover of a member without --removed: want a refusal that names --removed, got %v: %s", err, out)
	}
	out, err := runLH(time.Minute, "recover", "--data-dir", f.dataDir, "--removed", "--yes")
	if err != nil {
		return fmt.Errorf("recover %s: %w", f.id, err)
	}
	t.Logf("leasehold recover --removed: %s", out)
	f.args = []string{"--join", via.url}
	if err := f.start(); err != nil {
		return fmt.Errorf("%s did not start with --join after leasehold recover: %w", f.id, err)
	}
	return nil
}

// errExited: a node that was running exited.
var errExited = errors.New("exited")

// caughtUp waits until follower f has applied everything the cluster
// committed by now (replaying its own log included) and still runs.
func caughtUp(ctx context.Context, f *node, c *client.Client) error {
	st, err := c.ClusterStatus(ctx)
	if err != nil {
		return err
	}
	var commit uint64
	for _, s := range st {
		commit = max(commit, s.CommitIndex)
	}
	fc := newClient(f.t, "", f.url)
	var exited error
	err = checkFor(progressTimeout, func() error {
		if f.p.Exited() {
			exited = fmt.Errorf("follower %s %w after it restarted (%v): %s", f.id, errExited, f.p.Err, why(f.p.Stderr()))
			return nil
		}
		sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		st, err := fc.ClusterStatus(sctx)
		if err != nil {
			return err
		}
		for _, s := range st {
			if s.ID == f.id && s.AppliedIndex >= commit {
				return nil
			}
		}
		return fmt.Errorf("follower %s has not applied up to index %d yet: %v", f.id, commit, st)
	})
	if exited != nil {
		return exited
	}
	return err
}

// damageScenario runs a workload on n, damages its log and brings it back
// as an operator would. lossSaid reports whether recover ran and said it
// loses entries.
func damageScenario(t *testing.T, n *node, h *history, prefix string, damage func(string) (string, error)) (lossSaid bool, err error) {
	if err := n.start(); err != nil {
		return false, err
	}
	c := newClient(t, "", n.url)
	w := startWorkload(c, h, prefix, 2)
	err = w.waitAcks(int64(rounds(40, 400)), progressTimeout)
	w.stop()
	if err != nil {
		return false, fmt.Errorf("before the damage: %w", err)
	}
	// The last entries in the log: a lease still held when the node dies,
	// and its holder's write. Damage at the tail takes them away, and the
	// next grant must not get that lease's token again.
	ctx, cancel := context.WithTimeout(context.Background(), progressTimeout)
	defer cancel()
	held := prefix + "/held"
	l, err := c.Acquire(ctx, held, client.TTL(5*time.Second), client.ManualRenew())
	if err != nil {
		return false, fmt.Errorf("acquire %s before the damage: %w", held, err)
	}
	h.granted(held, l.ID(), l.Token())
	if err := putFenced(ctx, c, h, held+"/last", []byte("last write"), held, l.Token()); err != nil {
		return false, fmt.Errorf("write under %s before the damage: %w", held, err)
	}
	what, err := killAndDamage(n, damage)
	if err != nil {
		return false, err
	}
	t.Logf("damaged the log: %s", what)
	out, err := startOrRecover(t, n)
	if err != nil {
		return false, err
	}
	lossSaid = strings.Contains(out, "LOSE ")
	h.nextPhase()
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return lossSaid, regrant(ctx, c, h, prefix)
}

// killAndDamage kills n and damages the last segment of its log; it
// says what it did.
func killAndDamage(n *node, damage func(string) (string, error)) (string, error) {
	if err := n.p.Kill(); err != nil {
		return "", err
	}
	seg, err := walfile.LastSegment(n.dataDir)
	if err != nil {
		return "", err
	}
	what, err := damage(seg)
	if err != nil {
		return "", fmt.Errorf("damage %s: %w", seg, err)
	}
	return what, nil
}

// startOrRecover starts n; if it refuses to start (or dies starting), it
// runs `leasehold recover --data-dir D --yes`, as an operator would, and
// starts n again. out is what recover said ("" if it did not run).
func startOrRecover(t *testing.T, n *node) (out string, err error) {
	err = n.start()
	if err == nil {
		return "", nil
	}
	t.Logf("the node did not start on the damaged log: %v", err)
	return recoverAndStart(t, n, err)
}

// recoverAndStart runs `leasehold recover --data-dir D --yes` on n's data
// dir and starts n again; failed is why n is not running. out is what
// recover said.
func recoverAndStart(t *testing.T, n *node, failed error) (out string, err error) {
	n.p.Kill()
	out, rerr := runLH(time.Minute, "recover", "--data-dir", n.dataDir, "--yes")
	if rerr != nil {
		return out, fmt.Errorf("the node did not start (%v), and recovery failed: %w", firstLine(failed.Error()), rerr)
	}
	t.Logf("leasehold recover: %s", out)
	if err := n.start(); err != nil {
		return out, fmt.Errorf("the node did not start after leasehold recover: %w", err)
	}
	return out, nil
}

// truncateTail cuts the last commits off the segment, as a torn write or
// a lost page cache would: the log ends early, at a clean frame boundary.
func truncateTail(seg string) (string, error) {
	frames, err := walfile.Frames(seg)
	if err != nil {
		return "", err
	}
	commits := walfile.OfType(frames, walfile.FrameCommit)
	cut := min(len(commits)/2, 10)
	if cut < 2 {
		return "", errors.New("too few commits to truncate")
	}
	at := commits[len(commits)-cut].Offset + walfile.FrameHeaderLen
	if err := os.Truncate(seg, at); err != nil {
		return "", err
	}
	return fmt.Sprintf("truncated %s at offset %d (the last %d of %d commits gone)", seg, at, cut-1, len(commits)), nil
}

// flipMiddle inverts 8 bytes inside an entry in the middle of the segment,
// as bit rot would.
func flipMiddle(seg string) (string, error) {
	entries, err := walfile.Entries(seg)
	if err != nil {
		return "", err
	}
	var e walfile.Frame
	for _, f := range entries[len(entries)/2:] {
		if f.Len >= 16 {
			e = f
			break
		}
	}
	if e.Len == 0 {
		return "", errors.New("no entry of 16 bytes or more in the second half")
	}
	off := e.Offset + walfile.FrameHeaderLen + int64(e.Len/2-4)
	b := make([]byte, 8)
	f, err := os.Open(seg)
	if err != nil {
		return "", err
	}
	_, err = f.ReadAt(b, off)
	f.Close()
	if err != nil {
		return "", err
	}
	for i := range b {
		b[i] ^= 0xff
	}
	if err := walfile.WriteAt(seg, off, b); err != nil {
		return "", err
	}
	return fmt.Sprintf("flipped 8 bytes of %s at offset %d (inside entry frame at %d, %d of %d entries)", seg, off, e.Offset, len(entries)/2, len(entries)), nil
}

// zeroFrameHeader zeroes the header of an entry frame in the middle of the
// segment: a reader that takes a zero header for the end of the data sees
// a log that ends there.
func zeroFrameHeader(seg string) (string, error) {
	entries, err := walfile.Entries(seg)
	if err != nil {
		return "", err
	}
	e := entries[len(entries)/2]
	if err := walfile.WriteAt(seg, e.Offset, make([]byte, walfile.FrameHeaderLen)); err != nil {
		return "", err
	}
	return fmt.Sprintf("zeroed the frame header of entry %d of %d in %s at offset %d", len(entries)/2, len(entries), seg, e.Offset), nil
}
