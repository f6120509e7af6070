package torture

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// run is one torture run in progress.
type run struct {
	cfg        Config
	rec        *recorder
	local      *localCluster // nil against --endpoints
	endpoints  []string
	admin      *client.Client
	queue      string // the run's queue and group (empty: not made)
	group      string
	partitions int // partition faults so far
	logMu      sync.Mutex
}

// name is a name of the run's, under its prefix.
func (r *run) name(format string, args ...any) string {
	return r.cfg.Prefix + fmt.Sprintf(format, args...)
}

func (r *run) logf(format string, args ...any) {
	if r.cfg.Log == nil {
		return
	}
	r.logMu.Lock()
	defer r.logMu.Unlock()
	clear := ""
	if r.cfg.Progress != nil {
		clear = "\r\033[K" // the bar is redrawn after the line
	}
	fmt.Fprintf(r.cfg.Log, "%s%6.1fs  %s\n", clear, float64(r.rec.now())/1e9, fmt.Sprintf(format, args...))
}

// Run runs the workload for cfg.Duration (ctx ends it early), injecting
// faults, then checks the history. The error is for a run that could not
// be made (a cluster that never answered); violations are in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, rec: newRecorder(cfg.History), endpoints: cfg.Endpoints}
	if cfg.Local > 0 {
		var rates []float64
		if cfg.faulty(FaultSkew) {
			rates = []float64{1, 1 + cfg.SkewRate, 1 - cfg.SkewRate}
		}
		lc, err := startLocal(ctx, cfg.Bin, cfg.Local, rates, cfg.faulty(FaultPartition))
		if err != nil && strings.Contains(err.Error(), "address already in use") {
			// A free port picked was taken before a node bound it.
			lc, err = startLocal(ctx, cfg.Bin, cfg.Local, rates, cfg.faulty(FaultPartition))
		}
		if err != nil {
			return nil, fmt.Errorf("start %d local nodes: %w", cfg.Local, err)
		}
		defer lc.close()
		r.local, r.endpoints = lc, lc.URLs()
		r.logf("started %d local nodes in %s", cfg.Local, lc.dir)
	}
	var err error
	if r.admin, err = r.newClient(nil); err != nil {
		return nil, err
	}
	defer r.admin.Close()
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	defer r.cleanup()

	workers := make([]*worker, cfg.Workers+groupMembers)
	for i := range workers {
		last := &lastHost{RoundTripper: &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}}
		c, err := r.newClient(last)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		workers[i] = &worker{id: i, c: c, last: last, rng: rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano()))),
			rec: r.rec, run: r, reread: [kvGroups]int{-1, -1}}
	}
	load, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i >= cfg.Workers {
				if r.group != "" {
					w.member(load)
				}
				return
			}
			w.loop(load)
		}()
	}
	faultsDone := make(chan struct{})
	go func() {
		defer close(faultsDone)
		r.faultLoop(load)
	}()
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		r.progress(load)
	}()
	<-load.Done()
	interrupted := ctx.Err() != nil
	<-progressDone
	<-faultsDone
	r.logf("load stopped; waiting for calls in flight")
	wg.Wait()
	r.heal(context.WithoutCancel(ctx))
	rep := r.check(context.WithoutCancel(ctx), workers[0])
	rep.Interrupted = interrupted
	if err := r.rec.flush(); err != nil {
		return rep, fmt.Errorf("--history: %w", err)
	}
	return rep, nil
}

// newClient makes a client of the run's endpoints; last, if set, carries
// its requests.
func (r *run) newClient(last *lastHost) (*client.Client, error) {
	cc := client.Config{}
	if r.cfg.ClientConfig != nil {
		var err error
		if cc, err = r.cfg.ClientConfig(); err != nil {
			return nil, err
		}
	}
	cc.Endpoints = r.endpoints
	cc.Session = client.SessionOff // one request per call: the node that answered is known
	if last != nil {
		if cc.TLS != nil {
			last.RoundTripper.(*http.Transport).TLSClientConfig = cc.TLS
		}
		cc.HTTPClient = &http.Client{Transport: last}
	}
	return client.New(cc)
}

// loop runs tasks of every primitive until ctx ends.
func (w *worker) loop(ctx context.Context) {
	tasks := []func(context.Context){
		w.leaseTask, w.leaseTask, w.leaseTask,
		w.kvTask, w.kvTask, w.kvTask,
		w.electionTask,
		w.idemTask,
	}
	if w.run.queue != "" {
		tasks = append(tasks, w.queueTask, w.queueTask, w.queueTask)
	}
	for ctx.Err() == nil {
		tasks[w.rng.IntN(len(tasks))](ctx)
	}
}

// setup makes the run's queue and partition group. Both need an admin
// token: without one, the run goes on without them and says so.
func (r *run) setup(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	q := r.name("queue")
	_, err := retry(ctx, func() error {
		_, err := r.admin.CreateQueue(ctx, q, client.QueueSettings{Visibility: queueVisibility, MaxReceives: 1000})
		return err
	})
	switch {
	case err == nil:
		r.queue = q
	case errors.Is(err, leasehold.ErrPermission):
		r.logf("no queue: creating one needs an admin token (%v)", err)
	default:
		return fmt.Errorf("create queue %s: %w", q, err)
	}
	g := r.name("group")
	_, err = retry(ctx, func() error {
		_, err := r.admin.CreateGroup(ctx, g, groupPartitions, client.RevokeTimeout(leaseTTL))
		return err
	})
	switch {
	case err == nil:
		r.group = g
	case errors.Is(err, leasehold.ErrPermission):
		r.logf("no partition group: creating one needs an admin token (%v)", err)
	default:
		return fmt.Errorf("create group %s: %w", g, err)
	}
	return nil
}

// retry calls f until it succeeds, fails for good, or ctx ends; an
// unavailable cluster (an election) is retried.
func retry(ctx context.Context, f func() error) (int, error) {
	for n := 1; ; n++ {
		err := f()
		if err == nil || !errors.Is(err, leasehold.ErrUnavailable) || ctx.Err() != nil {
			return n, err
		}
		if !sleep(ctx, 200*time.Millisecond) {
			return n, err
		}
	}
}

// heal wakes and restarts every local node, so that the checks can read
// the state back.
func (r *run) heal(ctx context.Context) {
	if r.local == nil {
		return
	}
	for _, nd := range r.local.nodes {
		if !nd.running() {
			if err := r.local.restart(ctx, nd); err != nil {
				r.logf("restart %s after the run: %v", nd.ID, err)
			}
		} else if nd.isPaused() {
			nd.signal(sigcont)
		}
	}
	if _, err := r.local.waitLeader(ctx, 30*time.Second); err != nil {
		r.logf("after the run: %v", err)
	}
}

// cleanup removes what the run made on a cluster it did not start: the
// queue, the group and every key under the prefix. Leases and elections
// were released by their workers; idempotency records expire after
// idemRetention.
func (r *run) cleanup() {
	if r.local != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if r.queue != "" {
		if err := r.admin.DeleteQueue(ctx, r.queue, "leasehold torture cleanup"); err != nil {
			r.logf("cleanup: delete queue %s: %v", r.queue, err)
		}
	}
	if r.group != "" {
		if err := r.admin.DeleteGroup(ctx, r.group, "leasehold torture cleanup"); err != nil {
			r.logf("cleanup: delete group %s: %v", r.group, err)
		}
	}
	n := 0
	for e, err := range r.admin.Keys(ctx, r.cfg.Prefix) {
		if err != nil {
			r.logf("cleanup: list keys under %s: %v", r.cfg.Prefix, err)
			break
		}
		if err := r.admin.Delete(ctx, e.Key); err != nil {
			r.logf("cleanup: delete %s: %v", e.Key, err)
			continue
		}
		n++
	}
	r.logf("cleanup: deleted %d keys under %s", n, r.cfg.Prefix)
}
