package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/netfault"
)

// partitionTTL is the workload's lease TTL: short, so that leases on the
// cut-off side lapse, and are taken over, within a scenario.
const partitionTTL = 3 * time.Second

// A partitionFault injects one scenario's faults into the running load,
// returning the windows in which hosts were cut off from every other.
type partitionFault func(t *testing.T, pc *partitionCluster, load *contention) ([]cutOff, error)

// TestPartitions runs real `leasehold serve` processes, each in a network
// namespace of its own (loopback without root), every link through a
// netfault proxy, under contending load from clients on every host, and
// partitions them: the leader cut off from the majority, a follower cut
// off with its clients, the leader's links cut one way (it can send but
// not receive, and the reverse), the leader's links flapping, and every
// link slow and lossy. In each: no two clients hold a resource at once
// (their holds on the test's clock, to their safe deadlines), successive
// holders' tokens strictly increase, every acknowledged write is on every
// node after the heal, no fenced write of a deposed holder is accepted,
// nothing on the cut-off side succeeds, and its leases end by the
// fail-closed bound (failClosedBound).
func TestPartitions(t *testing.T) {
	pc := startPartitionCluster(t)
	var rows []partitionRow
	for _, sc := range []struct {
		name  string
		fault partitionFault
	}{
		{"leader-isolated", isolateLeader},
		{"minority-client", minorityClient},
		{"leader-cannot-receive", oneWay(true)},
		{"leader-cannot-send", oneWay(false)},
		{"flapping", flapLeader},
		{"slow-lossy", slowLossy(100*time.Millisecond, 50*time.Millisecond, true)},
		{"slow-lossy-200ms", slowLossy(200*time.Millisecond, 100*time.Millisecond, false)},
	} {
		t.Run(sc.name, func(t *testing.T) {
			rows = append(rows, runPartition(t, pc, sc.name, sc.fault))
		})
	}
	t.Logf("partition scenarios (%s lab):\n%s", pc.lab.Mode, partitionTable(rows))
}

// runPartition runs one scenario: load, the fault, the heal, a new holder
// of every resource (with a deposed holder's write that must be refused),
// and the checks.
func runPartition(t *testing.T, pc *partitionCluster, name string, fault partitionFault) partitionRow {
	h := &history{}
	prefix := "faults/partition/" + name
	load := startContention(t, pc, h, prefix, 4, 2, partitionTTL)
	err := load.waitAcks(6, progressTimeout, pc.others("")...)
	var windows []cutOff
	if err == nil {
		windows, err = fault(t, pc, load)
	}
	load.stop()
	if e := pc.healed(); err == nil && e != nil {
		err = fmt.Errorf("after the heal: %w", e)
	}
	var lostEverywhere []string
	if err == nil {
		h.nextPhase()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err = regrant(ctx, pc.observer, h, prefix)
		cancel()
	}
	if err == nil {
		lostEverywhere, err = pc.readBackEverywhere(t, prefix, h)
	}
	n := load.counts(windows)
	finish(t, "partition-"+name, h, pc.observer, expect{}, err)
	seen, _ := h.count(context.Background(), nil) // what the history shows by itself
	// Stale writes: the load's by send time (checkStale), the rest (the
	// regrant's) by log index; both see the load's before a token floor.
	n.stale = max(n.stale, seen.stale)
	row := partitionRow{scenario: name, partitionCounts: n, acked: seen.acked, lostEverywhere: len(lostEverywhere)}
	t.Logf("%s: %d holds, exclusion %d, token order %d, isolated side answered %d, late calls %d, fail-closed %v (late %d)",
		name, n.holds, n.exclusion, n.order, n.isolatedOK, n.lateCalls, n.failClosed, n.lateFailClose)
	var bad []string
	for _, f := range []struct {
		what string
		n    int
	}{
		{"overlapping holds", n.exclusion}, {"tokens out of order", n.order}, {"calls answered on the cut-off side", n.isolatedOK},
		{"calls that outlived their bound", n.lateCalls}, {"leases that outlived the fail-closed bound", n.lateFailClose},
		{"acknowledged writes missing on some node", len(lostEverywhere)}, {"stale writes accepted", n.stale},
	} {
		if f.n > 0 {
			bad = append(bad, fmt.Sprintf("%s = %d", f.what, f.n))
		}
	}
	if len(bad) > 0 {
		t.Errorf("scenario %s: %s\n  %s", name, strings.Join(bad, "; "), strings.Join(append(n.examples, lostEverywhere...), "\n  "))
	}
	if n.holds == 0 {
		t.Errorf("scenario %s: no lease was held: nothing was checked", name)
	}
	return row
}

// holdFault is how long a cut lasts: long enough for the leases held on
// the cut-off side to lapse, and for the majority to take them over.
var holdFault = time.Duration(rounds(1, 3)) * (2*partitionTTL + time.Second)

// cutFor cuts the leader's host off (cut makes the cut) and checks what
// the failure semantics promise on both sides: on the cut-off side, a
// client's lease ends by failClosedBound; on the majority, a lease granted
// just before the cut and never renewed outlives the leader change, so
// that a waiter next to the new leader gets it only after its holder's
// deadline (invariant 5); and the majority goes on acknowledging writes.
// The cut holds for holdFault.
func cutFor(pc *partitionCluster, load *contention, host string, cut func()) (cutOff, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*progressTimeout)
	defer cancel()
	t, majority := load.t, pc.others(host)
	cutOffHolder, err := startHolder(ctx, pc.hostClient(t, pc.host(host), client.SessionDefault), load.h, host,
		fmt.Sprintf("%s/cut-off-%d", load.prefix, time.Now().UnixNano()), true)
	if err != nil {
		return cutOff{}, err
	}
	kept := fmt.Sprintf("%s/kept-%d", load.prefix, time.Now().UnixNano())
	keeper, err := startHolder(ctx, pc.hostClient(t, pc.host(majority[0]), client.SessionOff), load.h, majority[0], kept, false)
	if err != nil {
		return cutOff{}, err
	}
	cut()
	w := cutOff{hosts: []string{host}, from: time.Now()}
	until := w.from.Add(holdFault)
	// The waiter's acquire is one unary call (SessionOff), sent once the
	// majority has a new leader.
	next, err := pc.waitAfterTakeover(ctx, load, host, majority[1], kept)
	if err == nil {
		err = next.wait(load.h, kept)
	}
	if err == nil {
		err = load.waitAcks(6, progressTimeout, majority...)
	}
	time.Sleep(time.Until(until)) // the fault's length, not a wait for an event
	pc.lab.Net.Heal()
	w.to = time.Now()
	cutOffHolder.record(load)
	keeper.record(load)
	if next != nil && next.lease != nil {
		t.Logf("after the leader change the waiter on %s got %s %v after its holder's deadline",
			majority[1], kept, next.at.Sub(keeper.lease.Deadline()).Round(time.Millisecond))
		next.release(ctx, load, kept)
	}
	if err != nil {
		return w, fmt.Errorf("the majority %v while %s was cut off: %w", majority, host, err)
	}
	return w, nil
}

// waitAfterTakeover waits until a node other than old leads (as the
// majority sees it), then puts a client of host in line for resource
// there.
func (pc *partitionCluster) waitAfterTakeover(ctx context.Context, load *contention, old, host, resource string) (*waiter, error) {
	var urls []string
	for _, n := range pc.nodes {
		if n.ID != old {
			urls = append(urls, n.URL)
		}
	}
	seen := newClient(load.t, "", urls...)
	if err := checkFor(progressTimeout, func() error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		ms, err := seen.Members(ctx)
		for _, m := range ms {
			if m.Leader && m.ID != old {
				return nil
			}
		}
		return fmt.Errorf("no new leader yet (%v)", err)
	}); err != nil {
		return nil, err
	}
	return startWaiter(ctx, pc.hostClient(load.t, pc.host(host), client.SessionOff), seen, host, resource)
}

// isolateLeader cuts the leader's host off from both others.
func isolateLeader(t *testing.T, pc *partitionCluster, load *contention) ([]cutOff, error) {
	var ws []cutOff
	for range rounds(1, 3) {
		l, err := pc.leader()
		if err != nil {
			return ws, err
		}
		t.Logf("isolating the leader %s", l)
		w, err := cutFor(pc, load, l, func() { pc.lab.Net.Isolate(l) })
		ws = append(ws, w)
		if err != nil {
			return ws, err
		}
	}
	return ws, nil
}

// oneWay cuts the leader's links one way: with cannotReceive, the bytes
// from the others to the leader's host are held (its appends arrive, the
// answers do not come back); without, the bytes from it.
func oneWay(cannotReceive bool) partitionFault {
	return func(t *testing.T, pc *partitionCluster, load *contention) ([]cutOff, error) {
		l, err := pc.leader()
		if err != nil {
			return nil, err
		}
		w, err := cutFor(pc, load, l, func() {
			for _, o := range pc.others(l) {
				if cannotReceive {
					pc.lab.Net.CutOneWay(o, l)
				} else {
					pc.lab.Net.CutOneWay(l, o)
				}
			}
			t.Logf("leader %s: %v", l, pc.lab.Net)
		})
		return []cutOff{w}, err
	}
}

// flapLeader isolates the leader of the moment, again and again, for
// about an election's time and a renewal's, healing between.
func flapLeader(t *testing.T, pc *partitionCluster, load *contention) ([]cutOff, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds(4, 12))*3*time.Second)
	defer cancel()
	var hosts []string
	target, err := pc.leader()
	if err != nil {
		return nil, err
	}
	ws := pc.lab.Net.Flap(ctx, 1500*time.Millisecond, 1500*time.Millisecond, func() {
		if l, err := pc.leaderNow(); err == nil {
			target = l
		}
		hosts = append(hosts, target)
		pc.lab.Net.Isolate(target)
	})
	t.Logf("flapped %d times, isolating %v", len(ws), hosts)
	var out []cutOff
	for i, w := range ws {
		out = append(out, cutOff{hosts: hosts[i : i+1], from: w.From, to: w.To})
	}
	return out, load.waitAcks(6, progressTimeout, pc.others("")...)
}

// slowLossy delays every link by delay ± jitter and loses 5% of its
// chunks while the load runs; with needProgress, the load must go on.
// Without (200ms ± 100ms), the cluster cannot keep a leader: raft's
// leader lease (250ms) is shorter than the round trip, so the leader
// steps down and elections fail; then every call must fail within its
// bound and every lease end by its deadline, and nothing acknowledged
// may be lost.
func slowLossy(delay, jitter time.Duration, needProgress bool) partitionFault {
	return func(t *testing.T, pc *partitionCluster, load *contention) ([]cutOff, error) {
		if err := pc.lab.Net.Shape(netfault.Faults{Delay: delay, Jitter: jitter, Loss: 0.05}); err != nil {
			return nil, err
		}
		t.Logf("%v", pc.lab.Net)
		until := time.Now().Add(holdFault)
		var err error
		if needProgress {
			err = load.waitAcks(6, progressTimeout, pc.others("")...)
		}
		time.Sleep(time.Until(until)) // the fault's length
		if err != nil {
			return nil, fmt.Errorf("on slow, lossy links: %w", err)
		}
		return nil, nil
	}
}
