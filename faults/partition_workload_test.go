package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
)

// contention is load on a partitioned cluster: on every host, workers
// that contend for a few shared resources, write fenced values under the
// lease they win, then release it or (one time in eight) abandon it: stop
// reporting progress, let it lapse, and write once more with its token
// (a deposed holder's write: refused if another holder came since).
// Grants and acknowledged writes go to the history; holds and calls to
// the contention's own record.
type contention struct {
	t      *testing.T
	prefix string
	h      *history
	ttl    time.Duration
	mu     sync.Mutex
	holds  []hold
	calls  []call
	acks   map[string]int // acknowledged writes per host
	// violations the scenario itself saw (a lease on the cut-off side
	// still held when the cut healed)
	violations []string
	cancel     context.CancelFunc
	wg         sync.WaitGroup
}

func startContention(t *testing.T, pc *partitionCluster, h *history, prefix string, resources, workersPerHost int, ttl time.Duration) *contention {
	ctx, cancel := context.WithCancel(context.Background())
	w := &contention{t: t, prefix: prefix, h: h, ttl: ttl, acks: map[string]int{}, cancel: cancel}
	for _, host := range pc.lab.Hosts {
		// Half the workers on each host send their lease calls on the
		// session stream (the client's default), half as unary calls.
		clients := []*client.Client{pc.hostClient(t, host, client.SessionDefault), pc.hostClient(t, host, client.SessionOff)}
		for i := range workersPerHost {
			w.wg.Add(1)
			go func() {
				defer w.wg.Done()
				w.work(ctx, clients[i%2], host.Name, fmt.Sprintf("%s-w%d", host.Name, i), prefix, resources)
			}()
		}
	}
	return w
}

// stop ends the load and waits for every call in flight.
func (w *contention) stop() {
	w.cancel()
	w.wg.Wait()
}

// waitAcks waits until the hosts named have n more acknowledged writes
// between them than now.
func (w *contention) waitAcks(n int, timeout time.Duration, hosts ...string) error {
	count := func() int {
		w.mu.Lock()
		defer w.mu.Unlock()
		s := 0
		for _, h := range hosts {
			s += w.acks[h]
		}
		return s
	}
	want := count() + n
	return checkFor(timeout, func() error {
		if got := count(); got < want {
			return fmt.Errorf("%d of %d acknowledged writes from %v", got, want, hosts)
		}
		return nil
	})
}

// add records a hold the scenario itself kept.
func (w *contention) add(h hold) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.holds = append(w.holds, h)
}

// violation records what the scenario itself saw go wrong.
func (w *contention) violation(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violations = append(w.violations, fmt.Sprintf(format, args...))
}

func (w *contention) record(c call, err error) {
	c.returned, c.ok = time.Now(), err == nil
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, c)
}

// counts checks the holds and calls against the cut-off windows.
func (w *contention) counts(windows []cutOff) partitionCounts {
	w.mu.Lock()
	holds := append([]hold(nil), w.holds...)
	calls := append([]call(nil), w.calls...)
	w.mu.Unlock()
	n := partitionCounts{holds: len(holds)}
	checkExclusion(holds, &n)
	checkCalls(holds, calls, &n)
	checkCutOff(holds, calls, windows, w.ttl, &n)
	checkStale(holds, calls, &n)
	for _, v := range w.violations {
		n.lateFailClose++
		n.example("%s", v)
	}
	return n
}

func (w *contention) work(ctx context.Context, c *client.Client, host, name, prefix string, resources int) {
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	wait := 2 * w.ttl
	for n := 0; ctx.Err() == nil; n++ {
		r := fmt.Sprintf("%s/r%d", prefix, rnd.IntN(resources))
		// The call fails closed within its bound: an attempt on a node
		// that went silent takes the wait and a request's timeout, and
		// a second attempt (on another node) a request's timeout.
		bound := wait + 2*partitionRequestTimeout
		actx, cancel := context.WithTimeout(ctx, bound)
		cl := call{host: host, what: "acquire " + r, sent: time.Now(), bound: bound}
		l, err := c.Acquire(actx, r, client.TTL(w.ttl), client.Wait(wait), client.ProgressTimeout(w.ttl/3))
		cancel()
		if ctx.Err() != nil && err != nil {
			return
		}
		w.record(cl, err)
		if err != nil {
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		w.h.granted(r, l.ID(), l.Token())
		hd := hold{resource: r, leaseID: l.ID(), token: l.Token(), host: host, start: time.Now()}
		doneAt := make(chan time.Time, 1) // when the client ended the lease
		go func() { <-l.Done(); doneAt <- time.Now() }()
		abandon := rnd.IntN(8) == 0
		lctx := l.Context(ctx) // the work stops when the lease ends
		for k := range 3 {
			if !abandon {
				l.Progress("")
			}
			w.put(lctx, c, host, fmt.Sprintf("%s/%s/%d-%d", r, name, n, k), r, l.Token())
			sleepCtx(lctx, 50*time.Millisecond)
		}
		if abandon {
			select {
			case <-l.Done():
			case <-ctx.Done():
			}
		}
		if errors.Is(l.Err(), client.ErrLeaseLost) {
			hd.lost, hd.doneAt, hd.end = true, <-doneAt, l.Deadline()
			// The deposed holder writes on: refused if anyone was granted
			// the resource since (the history counts it stale if not).
			w.put(ctx, c, host, fmt.Sprintf("%s/%s/%d-zombie", r, name, n), r, l.Token())
		} else {
			hd.end = minTime(time.Now(), l.Deadline())
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), partitionRequestTimeout)
			l.Release(rctx)
			cancel()
		}
		w.add(hd)
	}
}

// put writes key fenced by (resource, token), within one attempt's
// time, recording the call and, if acknowledged, the write.
func (w *contention) put(ctx context.Context, c *client.Client, host, key, resource string, token uint64) error {
	cl := call{host: host, what: "put " + key, sent: time.Now(), bound: partitionRequestTimeout, resource: resource, token: token}
	ctx, cancel := context.WithTimeout(ctx, cl.bound)
	defer cancel()
	err := putFenced(ctx, c, w.h, key, []byte("value of "+key), resource, token)
	if err == nil {
		w.mu.Lock()
		w.acks[host]++
		w.mu.Unlock()
	}
	w.record(cl, err)
	return err
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
