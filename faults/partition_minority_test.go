package faults

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/netfault"
)

// minorityClient cuts a follower's host off with the clients on it,
// while one of them holds a lease that a client next to the leader waits
// for. The holder is far from the leader (their link 200ms ± 50ms each
// way) and the leader close to the third node, whose quorum hands the
// lease over fast: a holder that counted its deadline from the reply, not
// from before the send, would believe in its lease past the hand-over.
// The holder's lease must end at its safe deadline, at most
// failClosedBound after the cut; the waiter must get it only after that;
// the holder's writes with its token, during the cut and after the heal,
// must be refused.
func minorityClient(t *testing.T, pc *partitionCluster, load *contention) ([]cutOff, error) {
	l, err := pc.leader()
	if err != nil {
		return nil, err
	}
	f := pc.others(l)[0]
	if err := pc.lab.Net.ShapeBetween(f, l, netfault.Faults{Delay: 200 * time.Millisecond, Jitter: 50 * time.Millisecond}); err != nil {
		return nil, err
	}
	resource := fmt.Sprintf("faults/partition/minority-client/held-%d", time.Now().UnixNano())
	far, near := pc.hostClient(t, pc.host(f), client.SessionDefault), pc.hostClient(t, pc.host(l), client.SessionDefault)
	ctx, cancel := context.WithTimeout(context.Background(), 2*progressTimeout)
	defer cancel()
	mine, err := startHolder(ctx, far, load.h, f, resource, true)
	if err != nil {
		return nil, err
	}
	next, err := startWaiter(ctx, near, pc.observer, l, resource)
	if err != nil {
		return nil, err
	}

	pc.lab.Net.Isolate(f)
	w := cutOff{hosts: []string{f}, from: time.Now()}
	t.Logf("cut off follower %s and its clients (leader %s): %v", f, l, pc.lab.Net)
	// During the cut the holder's writes with its token get nowhere.
	cutPut := make(chan error, 1)
	go func() { cutPut <- load.put(ctx, far, f, resource+"/during-cut", resource, mine.token) }()
	err = next.wait(load.h, resource)
	if err == nil {
		err = load.waitAcks(3, progressTimeout, pc.others(f)...)
	}
	time.Sleep(time.Until(w.from.Add(holdFault))) // the fault's length, not a wait for an event
	pc.lab.Net.Heal()
	w.to = time.Now()
	<-cutPut // answered inside the cut: counted by checkCutOff if it succeeded
	mine.record(load)
	if next.lease == nil {
		return []cutOff{w}, err
	}
	t.Logf("holder on %s: its lease ended %v after the cut, %v after its deadline (bound %v); the waiter on %s got it %v after that deadline",
		f, mine.doneAt.Sub(w.from), mine.doneAt.Sub(mine.end), failClosedBound(partitionTTL), l, next.at.Sub(mine.end))

	// Healed: the deposed holder writes with its token while the new
	// holder holds. It must be refused as stale (if it is accepted, the
	// history counts it stale).
	if e := checkFor(progressTimeout, func() error {
		e := load.put(ctx, far, f, resource+"/after-heal", resource, mine.token)
		if e != nil && !errors.Is(e, leasehold.ErrStaleToken) {
			return fmt.Errorf("the deposed holder's write after the heal: %w", e)
		}
		return nil
	}); e != nil && err == nil {
		err = e
	}
	next.release(ctx, load, resource)
	return []cutOff{w}, err
}
