// Command singleton runs a scheduled job on exactly one of its instances:
// every instance campaigns in a leasehold election, and only the leader
// runs the job, every --every, with the term's fencing token. When the
// leader dies or is stopped, the next candidate leads after its lease ends
// (at once after a clean stop, within a TTL after a crash) and runs the job
// with a larger token.
//
//	singleton --endpoints http://127.0.0.1:7420 --name cron/report --id "$(hostname)" --every 1m
//
// The job here records its run in leasehold's KV store as a write fenced
// by the term's token, so a deposed leader that wakes up from a pause
// cannot record a run over its successor's. A real job would pass the
// token to its own store (pgfence, httpfence).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// Job is one run of the scheduled work, with the leadership's context
// (it ends when leadership is lost) and the term's fencing token.
type Job func(ctx context.Context, token uint64) error

// Run campaigns for the election name as id and, while it leads, calls job
// at once and then every interval. When leadership is lost it campaigns
// again. It returns when ctx ends, giving leadership up first.
func Run(ctx context.Context, c *client.Client, name, id string, every, ttl time.Duration, job Job, log *slog.Logger) error {
	for ctx.Err() == nil {
		l, err := c.Campaign(ctx, name, id, client.TTL(ttl), client.Wait(time.Hour))
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("campaign failed; trying again", "err", err)
				sleep(ctx, time.Second)
			}
			continue
		}
		log.Info("leading", "election", name, "token", l.Token())
		lead(ctx, l, every, job, log)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if err := l.Resign(rctx); err != nil && !errors.Is(err, client.ErrLeaseLost) {
			log.Warn("resign", "err", err)
		}
		cancel()
	}
	return ctx.Err()
}

// lead runs job while both ctx and the leadership last.
func lead(ctx context.Context, l *client.Leadership, every time.Duration, job Job, log *slog.Logger) {
	jctx, cancel := context.WithCancel(l.Context())
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if err := job(jctx, l.Token()); err != nil && jctx.Err() == nil {
			log.Warn("job failed", "err", err)
		}
		select {
		case <-jctx.Done():
			log.Info("no longer leading", "cause", context.Cause(l.Context()))
			return
		case <-tick.C:
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// recordRun is the example's job: it writes who ran and when under
// name/last-run, fenced by the term's token, so a deposed leader's late
// write is refused (leasehold.ErrStaleToken).
func recordRun(c *client.Client, name, id string) Job {
	return func(ctx context.Context, token uint64) error {
		v := fmt.Sprintf("%s at %s (token %d)", id, time.Now().UTC().Format(time.RFC3339), token)
		_, err := c.Put(ctx, name+"/last-run", []byte(v), client.Fence(name, token))
		return err
	}
}

func main() {
	endpoints := flag.String("endpoints", "http://127.0.0.1:7420", "leasehold API URLs, comma-separated")
	name := flag.String("name", "cron/example", "the election: one leader per name")
	host, _ := os.Hostname()
	id := flag.String("id", fmt.Sprintf("%s/%d", host, os.Getpid()), "this instance, shown as the leader's value")
	every := flag.Duration("every", time.Minute, "how often the leader runs the job")
	ttl := flag.Duration("ttl", leasehold.DefaultTTL, "leadership lease TTL: how long a crashed leader blocks the next")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	c, err := client.New(client.Config{Endpoints: strings.Split(*endpoints, ","), Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "singleton:", err)
		os.Exit(1)
	}
	defer c.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	Run(ctx, c, *name, *id, *every, *ttl, recordRun(c, *name, *id), log)
}
