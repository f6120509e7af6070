package bench

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/leasehold/leasehold/client"
)

// Histogram indexes of the lock and contend workloads.
const (
	opAcquire = 0
	opRelease = 1
)

// lockWorkload: each client loops acquire (a random resource) and release.
// An acquire that finds its resource held queues for up to Config.Wait, as
// a lock user would.
type lockWorkload struct {
	r       *runner
	clients []*client.Client
	names   []string
	opts    []client.Option
	// contend: every client takes the one resource; the acquire latency is
	// the client's wait for the grant.
	contend bool
}

func newLockWorkload(r *runner) (workload, error) {
	w := &lockWorkload{r: r}
	w.names = make([]string, r.cfg.Resources)
	for i := range w.names {
		w.names[i] = fmt.Sprintf("bench/lock/%d", i)
	}
	return w, w.init("bench-lock")
}

func newContendWorkload(r *runner) (workload, error) {
	w := &lockWorkload{r: r, contend: true, names: []string{"bench/contend"}}
	return w, w.init("bench-contend")
}

func (w *lockWorkload) init(operation string) error {
	cfg := w.r.cfg
	// One client (and so one connection pool) per worker, as separate
	// processes would have, unless shared.
	var shared *client.Client
	for range cfg.Clients {
		c := shared
		if c == nil {
			var err error
			if c, err = newClient(cfg); err != nil {
				return err
			}
		}
		if cfg.Shared {
			shared = c
		}
		w.clients = append(w.clients, c)
	}
	w.opts = []client.Option{client.TTL(cfg.TTL), client.ManualRenew(), client.ProgressTimeout(0),
		client.Owner("leasehold-bench"), client.Operation(operation)}
	if cfg.Wait > 0 {
		w.opts = append(w.opts, client.Wait(cfg.Wait))
	}
	return nil
}

func (w *lockWorkload) opNames() []string {
	if w.contend {
		return []string{"wait", "release"}
	}
	return []string{"acquire", "release"}
}

func (w *lockWorkload) unit() string {
	if w.contend {
		return "grants"
	}
	return "pairs"
}

func (w *lockWorkload) setupDone() <-chan struct{} { return nil }
func (w *lockWorkload) progress() string           { return "" }

func (w *lockWorkload) worker(i int, st *stats) {
	r := w.r
	c := w.clients[i]
	rng := rand.New(rand.NewPCG(r.cfg.Seed, uint64(i)))
	for !r.stopping() && r.opCtx.Err() == nil {
		name := w.names[0]
		if len(w.names) > 1 {
			name = w.names[rng.IntN(len(w.names))]
		}
		t0 := time.Now()
		l, err := c.Acquire(r.opCtx, name, w.opts...)
		t1 := time.Now()
		if err != nil {
			st.fail(r, err)
			r.backoff()
			continue
		}
		if r.measuring() {
			st.ops[opAcquire].Record(t1.Sub(t0))
		}
		r.sleep(r.cfg.Hold)
		rctx, cancel := r.releaseCtx()
		t2 := time.Now()
		err = l.Release(rctx)
		t3 := time.Now()
		cancel()
		if err != nil {
			st.fail(r, err)
			continue
		}
		if r.complete() {
			st.ops[opRelease].Record(t3.Sub(t2))
		}
	}
}

func (w *lockWorkload) finish(rep *Report, st []*stats) {
	if w.contend {
		rep.Fairness = fairness(st, opAcquire)
	}
}
