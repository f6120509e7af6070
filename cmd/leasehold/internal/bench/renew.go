package bench

import (
	"container/heap"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// Histogram indexes of the renew workload.
const (
	opRenew    = 0
	opLag      = 1 // how late a renewal started after it was due
	opSetupAcq = 2 // acquires while taking the leases (not measured)

	renewRetryMin = 50 * time.Millisecond
)

// renewWorkload holds Config.Leases leases and renews each at TTL/3 from a
// pool of Config.Clients workers. Workers first take the leases; a
// dispatcher hands them the leases that are due, earliest first, so a
// pool that cannot keep up shows as growing lag and then as lost leases.
//
// A lease is lost when a renewal says the server no longer has it
// (not_found or not_holder) or when its local safe deadline passes before a
// renewal got through.
type renewWorkload struct {
	r      *runner
	c      *client.Client
	period time.Duration
	owner  string

	mu   sync.Mutex
	due  leaseHeap
	all  []*heldLease
	kick chan struct{}
	jobs chan *heldLease

	next       atomic.Int64 // next lease to acquire
	acquired   atomic.Int64 // acquires finished, granted or not
	setupCh    chan struct{}
	setupStart time.Time
	setupTime  atomic.Int64 // nanoseconds from start until every acquire finished
	held       atomic.Int64
	lostGone   atomic.Int64
	lostLate   atomic.Int64
	started    sync.Once
}

type heldLease struct {
	l     *client.Lease
	due   time.Time
	retry time.Duration
	lost  bool
	idx   int
}

type leaseHeap []*heldLease

func (h leaseHeap) Len() int           { return len(h) }
func (h leaseHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h leaseHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].idx = i; h[j].idx = j }
func (h *leaseHeap) Push(x any)        { l := x.(*heldLease); l.idx = len(*h); *h = append(*h, l) }
func (h *leaseHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return l
}

func newRenewWorkload(r *runner) (workload, error) {
	c, err := newClient(r.cfg)
	if err != nil {
		return nil, err
	}
	// A node refuses more than --max-leases-per-owner (100,000) leases to
	// one owner: runs with their own prefix, which may hold as many each,
	// are owners of their own, as separate processes would be.
	owner := "leasehold-bench"
	if r.cfg.LeasePrefix != "bench/renew" {
		owner += " " + r.cfg.LeasePrefix
	}
	w := &renewWorkload{
		r: r, c: c, period: r.cfg.TTL / 3, owner: owner,
		kick: make(chan struct{}, 1), jobs: make(chan *heldLease),
		setupCh: make(chan struct{}), setupStart: time.Now(),
	}
	go w.dispatch()
	return w, nil
}

func (w *renewWorkload) opNames() []string          { return []string{"renew", "renew lag", "setup acquire"} }
func (w *renewWorkload) unit() string               { return "renewals" }
func (w *renewWorkload) setupDone() <-chan struct{} { return w.setupCh }

func (w *renewWorkload) progress() string {
	return fmt.Sprintf("taking leases %d/%d", w.acquired.Load(), w.r.cfg.Leases)
}

func (w *renewWorkload) schedule(h *heldLease) {
	w.mu.Lock()
	heap.Push(&w.due, h)
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// dispatch hands due leases to the workers, earliest first.
func (w *renewWorkload) dispatch() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		w.mu.Lock()
		var h *heldLease
		wait := time.Hour
		if len(w.due) > 0 {
			if d := time.Until(w.due[0].due); d <= 0 {
				h = heap.Pop(&w.due).(*heldLease)
			} else {
				wait = d
			}
		}
		w.mu.Unlock()
		if h != nil {
			select {
			case w.jobs <- h:
			case <-w.r.stopped:
				return
			case <-w.r.opCtx.Done():
				return
			}
			continue
		}
		t.Reset(wait)
		select {
		case <-w.kick:
		case <-t.C:
		case <-w.r.stopped:
			return
		case <-w.r.opCtx.Done():
			return
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
	}
}

func (w *renewWorkload) worker(_ int, st *stats) {
	r := w.r
	for {
		// Renewals come first: they are what keeps leases alive.
		select {
		case h := <-w.jobs:
			w.renew(st, h)
			continue
		case <-r.stopped:
			return
		case <-r.opCtx.Done():
			return
		default:
		}
		if n := w.next.Add(1); n <= int64(r.cfg.Leases) {
			w.acquire(st, int(n-1))
			continue
		}
		select {
		case h := <-w.jobs:
			w.renew(st, h)
		case <-r.stopped:
			return
		case <-r.opCtx.Done():
			return
		}
	}
}

// setupLimitRetry is how long the renew workload retries a lease that a
// node's limit refuses while taking its leases.
const setupLimitRetry = 10 * time.Second

func (w *renewWorkload) acquire(st *stats, i int) {
	r := w.r
	defer func() {
		if w.acquired.Add(1) == int64(r.cfg.Leases) {
			w.setupTime.Store(int64(time.Since(w.setupStart)))
			close(w.setupCh)
		}
	}()
	t0 := time.Now()
	var l *client.Lease
	var err error
	for {
		l, err = w.c.Acquire(r.opCtx, fmt.Sprintf("%s/%d", r.cfg.LeasePrefix, i),
			client.TTL(r.cfg.TTL), client.ManualRenew(), client.ProgressTimeout(0),
			client.Owner(w.owner), client.Operation("bench-renew"))
		if err == nil {
			break
		}
		st.fail(r, err)
		// A node's acquisition rate limit slows the setup down; any other
		// error (or a limit that does not pass) costs the lease.
		if !errors.Is(err, leasehold.ErrLimit) || time.Since(t0) > setupLimitRetry || r.opCtx.Err() != nil {
			return
		}
		r.sleep(50 * time.Millisecond)
	}
	st.ops[opSetupAcq].Record(time.Since(t0))
	h := &heldLease{l: l, due: t0.Add(w.period)}
	w.mu.Lock()
	w.all = append(w.all, h)
	w.mu.Unlock()
	w.held.Add(1)
	w.schedule(h)
}

func (w *renewWorkload) renew(st *stats, h *heldLease) {
	r := w.r
	start := time.Now()
	if r.measuring() {
		st.ops[opLag].Record(start.Sub(h.due))
	}
	if !start.Before(h.l.Deadline()) {
		w.lose(h, &w.lostLate)
		return
	}
	err := h.l.Renew(r.opCtx)
	end := time.Now()
	if err == nil {
		if r.complete() {
			st.ops[opRenew].Record(end.Sub(start))
		}
		h.due, h.retry = start.Add(w.period), 0
		w.schedule(h)
		return
	}
	switch c := leasehold.CodeOf(err); {
	case r.opCtx.Err() != nil:
		return // the run was stopped, not the lease
	case c == leasehold.CodeNotFound || c == leasehold.CodeNotHolder:
		st.fail(r, err)
		w.lose(h, &w.lostGone)
	case !time.Now().Before(h.l.Deadline()):
		st.fail(r, err)
		w.lose(h, &w.lostLate)
	default:
		// Unreachable or slow: try again soon while the deadline allows.
		st.fail(r, err)
		h.retry = min(max(2*h.retry, renewRetryMin), time.Second)
		h.due = end.Add(h.retry)
		w.schedule(h)
	}
}

func (w *renewWorkload) lose(h *heldLease, counter *atomic.Int64) {
	w.mu.Lock()
	h.lost = true
	w.mu.Unlock()
	counter.Add(1)
	w.held.Add(-1)
}

func (w *renewWorkload) finish(rep *Report, st []*stats) {
	setup := time.Duration(w.setupTime.Load())
	var setupHist Hist
	for _, s := range st {
		setupHist.Merge(&s.ops[opSetupAcq])
	}
	rr := &RenewReport{
		Leases:       w.r.cfg.Leases,
		Granted:      setupHist.Count(),
		HeldAtEnd:    w.held.Load(),
		Lost:         w.lostGone.Load() + w.lostLate.Load(),
		LostNotFound: w.lostGone.Load(),
		LostDeadline: w.lostLate.Load(),
		Period:       w.period.String(),
		RequiredRate: float64(setupHist.Count()) / w.period.Seconds(),
		SetupSeconds: round3(setup.Seconds()),
	}
	if setup > 0 {
		rr.SetupRate = rate(setupHist.Count(), setup)
	}
	rep.Renew = rr
	// The setup acquires are not part of the measurement.
	rep.Ops, rep.hists = rep.Ops[:opSetupAcq], rep.hists[:opSetupAcq]
}

// release gives back every lease still held, from a pool of workers, until
// ctx ends. It returns how many were released.
func (w *renewWorkload) releaseAll(ctxDone <-chan struct{}, workers int) int64 {
	w.mu.Lock()
	var todo []*heldLease
	for _, h := range w.all {
		if !h.lost {
			todo = append(todo, h)
		}
	}
	w.mu.Unlock()
	ch := make(chan *heldLease)
	var n atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for h := range ch {
				ctx, cancel := w.r.releaseCtx()
				if h.l.Release(ctx) == nil {
					n.Add(1)
				}
				cancel()
			}
		}()
	}
feed:
	for _, h := range todo {
		select {
		case ch <- h:
		case <-ctxDone:
			break feed
		}
	}
	close(ch)
	wg.Wait()
	return n.Load()
}
