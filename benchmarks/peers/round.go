package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// scenario is one cell of the grid: a cluster size, a number of resources
// to choose from and a number of workers.
type scenario struct {
	// Primitive is lock, queue or idem.
	Primitive string `json:"primitive"`
	Nodes     int    `json:"nodes"`
	Resources int    `json:"resources"`
	Workers   int    `json:"workers"`
}

// result is what one target did in one scenario.
type result struct {
	scenario
	Target     string        `json:"target"`
	Pairs      int           `json:"pairs"`
	PairsPerS  float64       `json:"pairs_per_s"`
	AcquireP50 time.Duration `json:"acquire_p50"`
	AcquireP99 time.Duration `json:"acquire_p99"`
	Errors     int           `json:"errors"`
	// CPU per pair in the measured window: the nodes' processes together,
	// and this process (the clients).
	NodeCPU   time.Duration `json:"node_cpu_per_pair"`
	ClientCPU time.Duration `json:"client_cpu_per_pair"`
	// Heap allocations per pair in the measured window: the nodes'
	// (their go_memstats_mallocs_total; -1 for a server not written in
	// Go) and this process's.
	NodeAllocs   float64 `json:"node_allocs_per_pair"`
	ClientAllocs float64 `json:"client_allocs_per_pair"`
	FirstError   string  `json:"first_error,omitempty"`
	// Queues: deliveries out of their key's order (must be 0), and
	// deliveries of a message again.
	OrderViolations int64 `json:"order_violations,omitempty"`
	Redelivered     int64 `json:"redelivered,omitempty"`
	// Contended (one resource, several workers): each acquire's wait
	// against its FIFO bound, the workers ahead of it when it asked (the
	// holder included) times the mean hand-off of the round.
	Fifo *fifoStats `json:"fifo,omitempty"`
}

type fifoStats struct {
	MeanAhead   float64       `json:"mean_ahead"`   // workers ahead of an acquire when it asked
	MeanHandoff time.Duration `json:"mean_handoff"` // measured time / grants
	Bound       time.Duration `json:"bound"`        // MeanAhead × MeanHandoff
	WaitP50     time.Duration `json:"wait_p50"`
	WaitP99     time.Duration `json:"wait_p99"`
	WaitMax     time.Duration `json:"wait_max"`
	RatioP50    float64       `json:"ratio_p50"` // wait / (its own ahead × mean hand-off)
	RatioP99    float64       `json:"ratio_p99"`
	RatioMax    float64       `json:"ratio_max"`
	Over2x      float64       `json:"over_2x"` // share of acquires that waited more than twice their bound
	// The time between one grant and the next: a waiter's wait is the sum
	// of the hand-offs ahead of it, so a slow one delays everyone in line.
	HandoffP50 time.Duration `json:"handoff_p50"`
	HandoffP99 time.Duration `json:"handoff_p99"`
	HandoffMax time.Duration `json:"handoff_max"`
}

type sample struct {
	wait    time.Duration
	ahead   int
	granted time.Time
}

// round runs workers that loop {lock a random resource, unlock} for
// warmup+measure and reports what was done in the measured window: pairs
// whose unlock ended in it, and acquires that ended in it.
func round(lk locker, m meter, sc scenario, target, prefix string, warmup, measure time.Duration) result {
	names := make([]string, sc.Resources)
	for i := range names {
		names[i] = fmt.Sprintf("%s/%d", prefix, i)
	}
	start := time.Now()
	from, to := start.Add(warmup), start.Add(warmup+measure)
	ctx, cancel := context.WithDeadline(context.Background(), to.Add(lockWait))
	defer cancel()
	var inLine atomic.Int64 // workers between asking and unlocking
	var mu sync.Mutex
	var samples []sample
	pairs, errs := 0, 0
	var firstErr string
	// What both sides used in the measured window.
	use := m.window(from, to)
	var wg sync.WaitGroup
	for w := range sc.Workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			var mine []sample
			myPairs, myErrs := 0, 0
			var myErr error
			for time.Now().Before(to) {
				name := names[rng.IntN(len(names))]
				ahead := int(inLine.Add(1) - 1)
				t0 := time.Now()
				unlock, err := lk.lock(ctx, w, name)
				t1 := time.Now()
				if err != nil {
					inLine.Add(-1)
					myErrs++
					myErr = err
					time.Sleep(10 * time.Millisecond)
					continue
				}
				err = unlock(ctx)
				inLine.Add(-1)
				t2 := time.Now()
				if t1.After(from) && t1.Before(to) {
					mine = append(mine, sample{t1.Sub(t0), ahead, t1})
				}
				if err != nil {
					myErrs++
					myErr = err
				} else if t2.After(from) && t2.Before(to) {
					myPairs++
				}
			}
			mu.Lock()
			samples = append(samples, mine...)
			pairs += myPairs
			errs += myErrs
			if myErr != nil && firstErr == "" {
				firstErr = myErr.Error()
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	r := result{scenario: sc, Target: target, Pairs: pairs, PairsPerS: float64(pairs) / measure.Seconds(),
		Errors: errs, FirstError: firstErr}
	(<-use).per(&r, pairs)
	waits := make([]time.Duration, len(samples))
	for i, s := range samples {
		waits[i] = s.wait
	}
	slices.Sort(waits)
	r.AcquireP50, r.AcquireP99 = quantile(waits, 0.50), quantile(waits, 0.99)
	if sc.Resources == 1 && sc.Workers > 1 && pairs > 0 && len(samples) > 0 {
		r.Fifo = fifo(samples, waits, measure/time.Duration(pairs))
	}
	return r
}

func fifo(samples []sample, sorted []time.Duration, handoff time.Duration) *fifoStats {
	f := &fifoStats{MeanHandoff: handoff, WaitP50: quantile(sorted, 0.50), WaitP99: quantile(sorted, 0.99), WaitMax: sorted[len(sorted)-1]}
	ratios := make([]float64, 0, len(samples))
	over, ahead := 0, 0
	for _, s := range samples {
		ahead += s.ahead
		bound := time.Duration(max(s.ahead, 1)) * handoff
		ratio := float64(s.wait) / float64(bound)
		ratios = append(ratios, ratio)
		if ratio > 2 {
			over++
		}
	}
	slices.Sort(ratios)
	byTime := slices.Clone(samples)
	slices.SortFunc(byTime, func(a, b sample) int { return a.granted.Compare(b.granted) })
	var gaps []time.Duration
	for i := 1; i < len(byTime); i++ {
		gaps = append(gaps, byTime[i].granted.Sub(byTime[i-1].granted))
	}
	slices.Sort(gaps)
	if len(gaps) > 0 {
		f.HandoffP50, f.HandoffP99, f.HandoffMax = quantile(gaps, 0.50), quantile(gaps, 0.99), gaps[len(gaps)-1]
	}
	f.MeanAhead = float64(ahead) / float64(len(samples))
	f.Bound = time.Duration(f.MeanAhead * float64(handoff))
	f.RatioP50, f.RatioP99, f.RatioMax = ratios[len(ratios)/2], ratios[len(ratios)*99/100], ratios[len(ratios)-1]
	f.Over2x = float64(over) / float64(len(samples))
	return f
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}
