// Command phases runs one worker of a batch job that goes in steps: every
// worker does its share of step 1, then waits at a leasehold barrier until
// all the job's workers have finished it, then goes on to step 2, and so
// on (a map stage before a reduce stage, a load before an index build).
//
//	phases --endpoints http://127.0.0.1:7420 --barrier jobs/nightly --workers 3 --id w1 --steps 3
//
// Each arrival is a lease: a worker that dies before arriving, or while it
// waits, is not counted, so the others wait for it to come back (or for
// the barrier's timeout, which breaks the step for everyone) instead of
// starting the next step without its share. Every trip carries a fencing
// token, the same for every worker of the step and larger for each step,
// for the next step's writes to carry.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/client"
)

// Step is one worker's share of a step (1, 2, ...), given the token of
// the previous step's trip (0 for the first step).
type Step func(ctx context.Context, step int, token uint64) error

// Run does steps steps as worker id, meeting the other workers at the
// barrier name (of workers parties, created if need be) after each. It
// returns the trip token of each step, or the first error: a step's
// work failing, or the barrier breaking (its timeout passed: a worker
// never came; client.ErrBarrierBroken).
func Run(ctx context.Context, c *client.Client, name, id string, workers, steps int, timeout time.Duration, work Step, log *slog.Logger) ([]uint64, error) {
	if _, err := c.CreateBarrier(ctx, name, workers, client.PhaseTimeout(timeout)); err != nil {
		return nil, err
	}
	var tokens []uint64
	token := uint64(0)
	for step := 1; step <= steps; step++ {
		if err := work(ctx, step, token); err != nil {
			return tokens, fmt.Errorf("step %d: %w", step, err)
		}
		end, err := c.Await(ctx, name, client.As(id), client.ArrivalTTL(5*time.Second))
		if err != nil {
			return tokens, fmt.Errorf("waiting for the others after step %d: %w", step, err)
		}
		log.Info("step done by every worker", "step", step, "phase", end.Phase, "token", end.Token)
		token = end.Token
		tokens = append(tokens, token)
	}
	return tokens, nil
}

// writeOutput is the example's step: it records the worker's share in
// leasehold's KV store with the token of the trip that let the step
// begin. A real step would pass that token to its own store as a fencing
// token (pgfence and httpfence accept any of leasehold's tokens: they
// only compare), so a write from a step already over is refused.
func writeOutput(c *client.Client, name, id string) Step {
	return func(ctx context.Context, step int, token uint64) error {
		v := fmt.Sprintf("step %d by %s after trip token %d", step, id, token)
		_, err := c.Put(ctx, fmt.Sprintf("%s/output/%s", name, id), []byte(v))
		return err
	}
}

func main() {
	endpoints := flag.String("endpoints", "http://127.0.0.1:7420", "leasehold API URLs, comma-separated")
	name := flag.String("barrier", "jobs/example", "the job's barrier")
	workers := flag.Int("workers", 3, "the job's workers: the barrier's parties")
	host, _ := os.Hostname()
	id := flag.String("id", fmt.Sprintf("%s/%d", host, os.Getpid()), "this worker, unique in the job")
	steps := flag.Int("steps", 3, "steps of the job")
	timeout := flag.Duration("timeout", 10*time.Minute, "break a step the workers do not all finish this long after the first did")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	c, err := client.New(client.Config{Endpoints: strings.Split(*endpoints, ","), Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "phases:", err)
		os.Exit(1)
	}
	defer c.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := Run(ctx, c, *name, *id, *workers, *steps, *timeout, writeOutput(c, *name, *id), log); err != nil {
		fmt.Fprintln(os.Stderr, "phases:", err)
		os.Exit(1)
	}
}
