package faults

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/client"
)

// The hand-overs the partition scenarios watch closely: a holder on one
// host whose lease must end (or last) as the failure semantics say, and a
// waiter on another host in line for the same resource, who must get it
// only after the holder's safe deadline.

// holder is a client on one host holding a lease: working under it
// (reporting progress, so renewal goes on) until the lease ends, or, with
// renew false, never renewing it.
type holder struct {
	hold
	lease *client.Lease
	ended chan struct{} // closed once hold.doneAt is set
}

// startHolder acquires resource from c, the client of host.
func startHolder(ctx context.Context, c *client.Client, h *history, host, resource string, renew bool) (*holder, error) {
	opts := []client.Option{client.TTL(partitionTTL)}
	if !renew {
		opts = append(opts, client.ManualRenew())
	}
	l, err := c.Acquire(ctx, resource, opts...)
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
	if renew {
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
	}
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
		load.violation("the lease %d on %s (%s) was still held when the cut healed", hd.leaseID, hd.host, hd.resource)
		hd.end = minTime(time.Now(), hd.lease.Deadline())
		ctx, cancel := context.WithTimeout(context.Background(), partitionRequestTimeout)
		hd.lease.Release(ctx)
		cancel()
	}
	load.add(hd.hold)
}

// waiter is a client in line for a resource that another holds.
type waiter struct {
	host    string
	lease   *client.Lease
	at      time.Time // when the grant came
	err     error
	granted chan struct{}
}

// startWaiter puts c, the client of host, in line for resource, and waits
// until the leader (as seen asks) has it in line, or it was granted.
func startWaiter(ctx context.Context, c, seen *client.Client, host, resource string) (*waiter, error) {
	w := &waiter{host: host, granted: make(chan struct{})}
	go func() {
		defer close(w.granted)
		w.lease, w.err = c.Acquire(ctx, resource, client.TTL(partitionTTL), client.Wait(progressTimeout))
		w.at = time.Now()
	}()
	err := checkFor(progressTimeout, func() error {
		select {
		case <-w.granted: // no wait at all: the exclusion check judges it
			return nil
		default:
		}
		info, err := seen.Get(ctx, resource)
		if err != nil || len(info.Waiters) == 0 {
			return fmt.Errorf("the waiter on %s is not in line for %s yet (%v)", host, resource, err)
		}
		return nil
	})
	return w, err
}

// wait waits for the grant and records it in h.
func (w *waiter) wait(h *history, resource string) error {
	<-w.granted
	if w.err != nil {
		return fmt.Errorf("the waiter on %s was not granted %s: %w", w.host, resource, w.err)
	}
	h.granted(resource, w.lease.ID(), w.lease.Token())
	return nil
}

// release ends the waiter's hold and adds it to load's.
func (w *waiter) release(ctx context.Context, load *contention, resource string) {
	if w.lease == nil {
		return
	}
	hd := hold{resource: resource, leaseID: w.lease.ID(), token: w.lease.Token(), host: w.host, start: w.at,
		end: minTime(time.Now(), w.lease.Deadline())}
	w.lease.Release(ctx)
	load.add(hd)
}
