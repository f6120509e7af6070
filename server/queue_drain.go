package server

import (
	"sync"
	"time"
)

// The retry-after hint of a Send refused for backpressure, from how fast
// the queue drains: the acks this node answered for it over the last
// drainWindow (acks are committed by the leader, which also answers the
// refused Send, so it sees them all while it leads). A producer waiting
// the hint finds about the room its send needs: a slow queue hints long,
// a fast one short. With no ack in the window there is no rate to go by
// (consumers just starting, a new leader, a stuck queue): the hint is
// noRateRetryAfter, so the first acks are not waited out behind a guess.
const (
	drainWindow      = 10 * time.Second
	minRetryAfter    = 100 * time.Millisecond
	maxRetryAfter    = 30 * time.Second
	noRateRetryAfter = time.Second
)

// drainRates counts acks per queue in one-second buckets.
type drainRates struct {
	now    func() time.Time
	mu     sync.Mutex
	queues map[string]*drainRing
}

// drainRing holds the acks of the last drainWindow, a bucket per second
// (sec is the unix second a bucket counts; an older one counts nothing).
type drainRing struct {
	sec   [drainBuckets]int64
	count [drainBuckets]int
}

const drainBuckets = int(drainWindow / time.Second)

func newDrainRates(now func() time.Time) *drainRates {
	return &drainRates{now: now, queues: map[string]*drainRing{}}
}

// acked counts n acks of queue now.
func (d *drainRates) acked(queue string, n int) {
	sec := d.now().Unix()
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.queues[queue]
	if r == nil {
		r = &drainRing{}
		d.queues[queue] = r
	}
	i := int(sec % int64(drainBuckets))
	if r.sec[i] != sec {
		r.sec[i], r.count[i] = sec, 0
	}
	r.count[i] += n
}

// retryAfter is how long the queue takes to free room for need messages
// at its recent ack rate, within [minRetryAfter, maxRetryAfter].
func (d *drainRates) retryAfter(queue string, need int) time.Duration {
	sec := d.now().Unix()
	acks := 0
	d.mu.Lock()
	if r := d.queues[queue]; r != nil {
		for i := range drainBuckets {
			if sec-r.sec[i] < int64(drainBuckets) {
				acks += r.count[i]
			}
		}
	}
	d.mu.Unlock()
	if acks == 0 {
		return noRateRetryAfter
	}
	hint := time.Duration(float64(max(need, 1)) / float64(acks) * float64(drainWindow))
	return min(max(hint, minRetryAfter), maxRetryAfter)
}

// forget drops a deleted queue's counts.
func (d *drainRates) forget(queue string) {
	d.mu.Lock()
	delete(d.queues, queue)
	d.mu.Unlock()
}
