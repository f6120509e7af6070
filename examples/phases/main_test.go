package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testcluster"
)

// steps records which step each worker is in, and fails the test if a
// worker starts step k+1 while another has not finished step k.
type steps struct {
	t    *testing.T
	mu   sync.Mutex
	done map[string]int // worker -> last step finished
}

func (s *steps) work(id string) Step {
	return func(ctx context.Context, step int, token uint64) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		for other, d := range s.done {
			if d < step-1 {
				s.t.Errorf("%s began step %d while %s had finished only step %d", id, step, other, d)
			}
		}
		s.done[id] = step
		return nil
	}
}

// Three workers go through three steps: none begins a step before every
// worker finished the one before; every worker sees the same trip token
// for a step, and the tokens increase from step to step. One worker is
// slow at step 2: the others wait for it.
func TestWorkersMeetBetweenSteps(t *testing.T) {
	tc := testcluster.Start(t, 1)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := &steps{t: t, done: map[string]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tokens := make([][]uint64, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		id := fmt.Sprint("w", i)
		c, err := client.New(client.Config{Endpoints: []string{tc.URL(0)}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		work := s.work(id)
		if i == 2 {
			work = func(ctx context.Context, step int, token uint64) error {
				if step == 2 {
					time.Sleep(500 * time.Millisecond)
				}
				return s.work(id)(ctx, step, token)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tokens[i], errs[i] = Run(ctx, c, "jobs/nightly", id, 3, 3, time.Minute, work, log)
		}()
	}
	wg.Wait()
	for i := range 3 {
		if errs[i] != nil || len(tokens[i]) != 3 {
			t.Fatalf("worker %d: %v %v", i, tokens[i], errs[i])
		}
		for step := range 3 {
			if tokens[i][step] != tokens[0][step] || (step > 0 && tokens[i][step] <= tokens[i][step-1]) {
				t.Fatalf("trip tokens: %v", tokens)
			}
		}
	}
}

// A worker that never comes breaks the step for the others once the
// barrier's timeout passes: they stop with ErrBarrierBroken instead of
// going on without its share.
func TestAMissingWorkerBreaksTheStep(t *testing.T) {
	tc := testcluster.Start(t, 1)
	c, err := client.New(client.Config{Endpoints: []string{tc.URL(0)}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := &steps{t: t, done: map[string]int{}}
	start := time.Now()
	_, err = Run(ctx, c, "jobs/short", "w0", 2, 1, time.Second, s.work("w0"), log)
	if !errors.Is(err, client.ErrBarrierBroken) {
		t.Fatalf("a step the second worker never finished: %v, want ErrBarrierBroken", err)
	}
	if took := time.Since(start); took < time.Second || took > 10*time.Second {
		t.Fatalf("broken after %v; the timeout is 1s", took)
	}
}
