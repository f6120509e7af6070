package bench

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// The phases of a run. Only operations that complete while measuring are
// counted; errors count from warm-up on.
const (
	phaseSetup int32 = iota
	phaseWarmup
	phaseMeasure
	phaseDone
)

// runner is the state shared by a run's workers.
type runner struct {
	cfg Config
	ctx context.Context // canceled on interrupt
	// opCtx carries the operations. It is canceled drainTimeout after the
	// measurement ends (normally or on interrupt), not at once: an acquire
	// canceled in flight may be granted all the same and leave its lease
	// held until the TTL.
	opCtx context.Context
	phase atomic.Int32

	mu           sync.Mutex
	measureStart time.Time
	measureEnd   time.Time
	cpuStart     time.Duration // process CPU time when measuring began
	cpuEnd       time.Duration
	idxStart     uint64 // commit index when measuring began (Config.LogIndex)
	idxEnd       uint64
	interrupted  bool
	stopped      chan struct{} // closed when the measurement ends
	stopOnce     sync.Once

	counted atomic.Int64 // measured main operations (pairs, grants, renewals)
}

func (r *runner) setPhase(p int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	switch p {
	case phaseMeasure:
		r.measureStart, r.cpuStart = now, processCPU()
		if r.cfg.LogIndex != nil {
			r.idxStart = r.cfg.LogIndex()
		}
	case phaseDone:
		if r.phase.Load() == phaseMeasure {
			r.measureEnd, r.cpuEnd = now, processCPU()
			if r.cfg.LogIndex != nil {
				r.idxEnd = r.cfg.LogIndex()
			}
		}
	}
	r.phase.Store(p)
}

// finish ends the measurement; the first call wins.
func (r *runner) finish(interrupted bool) {
	r.stopOnce.Do(func() {
		r.setPhase(phaseDone)
		r.mu.Lock()
		r.interrupted = interrupted
		r.mu.Unlock()
		close(r.stopped)
	})
}

func (r *runner) measuring() bool { return r.phase.Load() == phaseMeasure }
func (r *runner) stopping() bool  { return r.phase.Load() == phaseDone }

// complete is called as a main operation (pair, grant, renewal) finishes.
// It reports whether it counts: it completed while measuring and, with
// Ops, within the first Ops. The Ops-th ends the measurement.
func (r *runner) complete() bool {
	if !r.measuring() {
		return false
	}
	n := r.counted.Add(1)
	if r.cfg.Ops > 0 {
		if n > r.cfg.Ops {
			return false
		}
		if n == r.cfg.Ops {
			r.finish(false)
		}
	}
	return true
}

// window is how long the measurement lasted.
func (r *runner) window() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.measureStart.IsZero() {
		return 0
	}
	end := r.measureEnd
	if end.IsZero() {
		end = time.Now()
	}
	return end.Sub(r.measureStart)
}

func (r *runner) measuredCount() int64 {
	n := r.counted.Load()
	if r.cfg.Ops > 0 {
		n = min(n, r.cfg.Ops)
	}
	return n
}

// sleep waits d unless the run is aborted; it reports false if aborted.
func (r *runner) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.stopped:
		return false
	case <-r.opCtx.Done():
		return false
	}
}

// releaseCtx bounds a release: it goes on after the run's operations are
// canceled, so that leases taken are given back, but not for long.
func (r *runner) releaseCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.ctx), 2*time.Second)
}

// stats is one worker's record. Only its worker touches it until the run
// ends.
type stats struct {
	ops  []Hist // indexed like the workload's op names
	errs map[string]int64
}

func newStats(nOps int) *stats {
	return &stats{ops: make([]Hist, nOps), errs: map[string]int64{}}
}

// fail counts err by its code, unless it only says the run was stopped.
func (s *stats) fail(r *runner, err error) {
	if r.opCtx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return
	}
	s.errs[errorCode(err)]++
}

// errorCode names err for the report: the leasehold code, or the context
// error for a request that ran out of time.
func errorCode(err error) string {
	if c := leasehold.CodeOf(err); c != leasehold.CodeUnknown {
		return c.String()
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return leasehold.CodeUnknown.String()
}

// backoff pauses a worker briefly after an error so that an unreachable
// node is not spun on.
func (r *runner) backoff() { r.sleep(10 * time.Millisecond) }

// workload is one of lock, renew and contend.
type workload interface {
	// opNames names the histograms of stats.ops.
	opNames() []string
	// unit names the main operation counted for throughput ("pairs").
	unit() string
	// worker runs worker i until r.stopped is closed or r.opCtx ends.
	worker(i int, st *stats)
	// setupDone, if not nil, is closed when the workload is ready to be
	// measured.
	setupDone() <-chan struct{}
	// finish runs after every worker returned and adds the workload's own
	// figures to the report.
	finish(rep *Report, st []*stats)
	// progress describes the setup phase for the progress bar.
	progress() string
}

func newClient(cfg Config) (*client.Client, error) {
	cc := client.Config{Endpoints: cfg.Endpoints, Logger: slog.New(slog.DiscardHandler)}
	if cfg.ClientConfig != nil {
		var err error
		if cc, err = cfg.ClientConfig(); err != nil {
			return nil, err
		}
	}
	cc.MaxBatch, cc.Session = cfg.MaxBatch, cfg.Session
	if cfg.NoCompression {
		cc.HTTPClient = &http.Client{Transport: noCompression{&http.Transport{
			MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second, DisableCompression: true,
		}}}
	}
	return client.New(cc)
}

// noCompression drops the headers with which a Connect client offers to
// accept gzip.
type noCompression struct{ base http.RoundTripper }

func (t noCompression) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Del("Accept-Encoding")
	r.Header.Del("Connect-Accept-Encoding")
	return t.base.RoundTrip(r)
}

// Run runs the workload cfg describes and returns its report. It returns
// early, with the figures so far and Interrupted set, when ctx ends.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opCtx, cancelOps := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelOps()
	r := &runner{cfg: cfg, ctx: ctx, opCtx: opCtx, stopped: make(chan struct{})}

	var w workload
	var err error
	switch cfg.Workload {
	case Lock:
		w, err = newLockWorkload(r)
	case Contend:
		w, err = newContendWorkload(r)
	case Renew:
		w, err = newRenewWorkload(r)
	case Queue:
		w, err = newQueueWorkload(r)
	}
	if err != nil {
		return nil, err
	}

	started := time.Now()
	st := make([]*stats, cfg.Clients)
	var wg sync.WaitGroup
	for i := range st {
		st[i] = newStats(len(w.opNames()))
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.worker(i, st[i])
		}()
	}
	var pwg sync.WaitGroup
	if cfg.Progress != nil {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			showProgress(cfg.Progress, r, w)
		}()
	}

	r.control(w)

	// Let operations in flight finish, then cancel what is left.
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainTimeout):
		cancelOps()
		<-drained
	}
	pwg.Wait()

	rep := newReport(cfg, w, r, st, time.Since(started))
	w.finish(rep, st)
	if rw, ok := w.(*renewWorkload); ok && cfg.Cleanup && ctx.Err() == nil {
		rep.Renew.Released = rw.releaseAll(ctx.Done(), cfg.Clients)
	}
	return rep, nil
}

// control moves the run through its phases.
func (r *runner) control(w workload) {
	abort := func() { r.finish(true) }
	if ch := w.setupDone(); ch != nil {
		select {
		case <-ch:
		case <-r.ctx.Done():
			abort()
			return
		}
	}
	r.setPhase(phaseWarmup)
	if r.cfg.Warmup > 0 {
		t := time.NewTimer(r.cfg.Warmup)
		select {
		case <-t.C:
		case <-r.ctx.Done():
			t.Stop()
			abort()
			return
		}
	}
	r.setPhase(phaseMeasure)
	var limit <-chan time.Time
	if r.cfg.Duration > 0 {
		t := time.NewTimer(r.cfg.Duration)
		defer t.Stop()
		limit = t.C
	}
	select {
	case <-limit:
		r.finish(false)
	case <-r.stopped: // --ops reached
	case <-r.ctx.Done():
		abort()
	}
}
