package faults

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/netfault"
)

// holder is a client on one host holding a lease and working under it
// (reporting progress, so renewal goes on) until the lease ends.
type holder struct {
	hold
	lease *client.Lease
	ended chan struct{} // closed once hold.doneAt is set
}

// startHolder acquires resource from c, the client of host.
func startHolder(ctx context.Context, c *client.Client, h *history, host, resource string) (*holder, error) {
	l, err := c.Acquire(ctx, resource, client.TTL(partitionTTL))
	if err != nil {
		return nil, fmt.Errorf("the holder on %s: acquire %s: %w", host, resource, err)
	}
	h.granted(resource, l.ID(), l.Token())
	hd := &holder{hold: hold{resource: resource, leaseID: l.ID(), token: l.Token(), host: host, start: time.Now()},
		lease: l, ended: make(chan struct{})}
	go func() {
		<-l.Done()
		hd.doneAt = time.Now()
		close(hd.ended)
	}()
	go func() {
		for {
			l.Progress("")
			select {
			case <-l.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return hd, nil
}

// record adds the hold to load's once the lease has ended; a lease that
// has not ended by the heal of a cut longer than failClosedBound is a
// violation, and is released.
func (hd *holder) record(load *contention) {
	select {
	case <-hd.ended:
		hd.end, hd.lost = hd.lease.Deadline(), errors.Is(hd.lease.Err(), client.ErrLeaseLost)
	default:
		load.mu.Lock()
		load.violations = append(load.violations, fmt.Sprintf("the lease %d on cut-off %s (%s) was still held when the cut healed",
			hd.leaseID, hd.host, hd.resource))
		load.mu.Unlock()
		hd.end = minTime(time.Now(), hd.lease.Deadline())
		ctx, cancel := context.WithTimeout(context.Background(), partitionRequestTimeout)
		hd.lease.Release(ctx)
		cancel()
	}
	load.mu.Lock()
	load.holds = append(load.holds, hd.hold)
	load.mu.Unlock()
}

// minorityClient cuts a follower's host off with the clients on it,
// while one of them holds a lease that a client next to the leader waits
// for. Every link is 100ms ± 50ms slow first (the holder is far from the
// leader): a holder that counted its deadline from the reply, not from
// before the send, would then believe in its lease past the moment the
// leader hands it over. The holder's lease must end at its safe deadline,
// at most failClosedBound after the cut; the waiter must get it only
// after that; the holder's writes with its token, during the cut and
// after the heal, must be refused.
func minorityClient(t *testing.T, pc *partitionCluster, load *contention) ([]cutOff, error) {
	if err := pc.lab.Net.Shape(netfault.Faults{Delay: 100 * time.Millisecond, Jitter: 50 * time.Millisecond}); err != nil {
		return nil, err
	}
	l, err := pc.leader()
	if err != nil {
		return nil, err
	}
	f := pc.others(l)[0]
	resource := fmt.Sprintf("faults/partition/minority-client/held-%d", time.Now().UnixNano())
	far, near := pc.hostClient(t, pc.host(f), client.SessionDefault), pc.hostClient(t, pc.host(l), client.SessionDefault)
	ctx, cancel := context.WithTimeout(context.Background(), 2*progressTimeout)
	defer cancel()
	mine, err := startHolder(ctx, far, load.h, f, resource)
	if err != nil {
		return nil, err
	}
	granted := make(chan error, 1)
	var next *client.Lease
	var nextAt time.Time
	go func() {
		var err error
		next, err = near.Acquire(ctx, resource, client.TTL(partitionTTL), client.Wait(progressTimeout))
		nextAt = time.Now()
		granted <- err
	}()
	if err := checkFor(progressTimeout, func() error {
		info, err := pc.observer.Get(ctx, resource)
		if err != nil || len(info.Waiters) == 0 {
			return fmt.Errorf("the waiter on %s is not in line yet (%v)", l, err)
		}
		return nil
	}); err != nil {
		return nil, err
	}

	pc.lab.Net.Isolate(f)
	w := cutOff{hosts: []string{f}, from: time.Now()}
	t.Logf("cut off follower %s and its clients (leader %s): %v", f, l, pc.lab.Net)
	// During the cut the holder's writes with its token get nowhere.
	cutPut := make(chan error, 1)
	go func() { cutPut <- load.put(ctx, far, f, resource+"/during-cut", resource, mine.token) }()
	err = <-granted
	if err == nil {
		load.h.granted(resource, next.ID(), next.Token())
		err = load.waitAcks(3, progressTimeout, pc.others(f)...)
	} else {
		err = fmt.Errorf("the waiter next to the leader %s was not granted %s: %w", l, resource, err)
	}
	time.Sleep(time.Until(w.from.Add(holdFault))) // the fault's length, not a wait for an event
	pc.lab.Net.Heal()
	w.to = time.Now()
	<-cutPut // answered inside the cut: counted by checkCutOff if it succeeded
	mine.record(load)
	if next == nil {
		return []cutOff{w}, err
	}
	theirs := hold{resource: resource, leaseID: next.ID(), token: next.Token(), host: l, start: nextAt}
	t.Logf("holder on %s: its lease ended %v after the cut, %v after its deadline (bound %v); the waiter on %s got it %v after that deadline",
		f, mine.doneAt.Sub(w.from), mine.doneAt.Sub(mine.end), failClosedBound(partitionTTL), l, theirs.start.Sub(mine.end))

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
	theirs.end = minTime(time.Now(), next.Deadline())
	next.Release(ctx)
	load.mu.Lock()
	load.holds = append(load.holds, theirs)
	load.mu.Unlock()
	return []cutOff{w}, err
}
