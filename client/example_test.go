package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// The examples need a running node, so they are compiled but not run (they
// have no Output comment). Start one with `leasehold` on 127.0.0.1:7420.

func work(ctx context.Context, token uint64) error { return ctx.Err() }

func ExampleNew() {
	c, err := client.New(client.Config{
		Endpoints: []string{"http://127.0.0.1:7420", "http://127.0.0.1:7430"},
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = c
}

func ExampleClient_Acquire() {
	c, err := client.New(client.Config{Endpoints: []string{"http://127.0.0.1:7420"}})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	lease, err := c.Acquire(ctx, "reports/nightly", client.TTL(15*time.Second),
		client.Wait(time.Minute), client.Operation("nightly-report"))
	switch {
	case errors.Is(err, leasehold.ErrWaitTimeout):
		log.Print("someone else is still running the report")
		return
	case err != nil:
		log.Fatal(err)
	}
	// Release even if ctx ends; a lost lease reports client.ErrLeaseLost.
	defer lease.Release(context.WithoutCancel(ctx))

	// The context ends when the lease is lost; the fencing token lets the
	// protected resource refuse a holder whose lease has passed on.
	if err := work(lease.Context(ctx), lease.Token()); err != nil {
		log.Print(err)
	}
}

func ExampleLease_Progress() {
	c, err := client.New(client.Config{Endpoints: []string{"http://127.0.0.1:7420"}})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	lease, err := c.Acquire(ctx, "reports/nightly", client.TTL(15*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(context.WithoutCancel(ctx))

	wctx := lease.Context(ctx)
	for batch := 0; batch < 10; batch++ {
		if err := work(wctx, lease.Token()); err != nil {
			// context.Cause says why: client.ErrLeaseLost, client.ErrNoProgress...
			log.Print(context.Cause(wctx))
			return
		}
		// Renewal continues only while the holder reports progress.
		lease.Progress(fmt.Sprintf("rows %d-%d written", batch*1000+1, (batch+1)*1000))
	}
}

func ExampleLease_Release() {
	c, err := client.New(client.Config{Endpoints: []string{"http://127.0.0.1:7420"}})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	lease, err := c.Acquire(ctx, "reports/nightly")
	if err != nil {
		log.Fatal(err)
	}
	// ... work under lease.Context(ctx) ...
	if err := lease.Release(ctx); errors.Is(err, client.ErrLeaseLost) {
		// The lease ended before the work did: the work after that ran
		// without it, and the protected resource may have refused it.
		log.Print(err)
	}
}

func ExampleClient_WithLock() {
	c, err := client.New(client.Config{Endpoints: []string{"http://127.0.0.1:7420"}})
	if err != nil {
		log.Fatal(err)
	}
	err = c.WithLock(context.Background(), "reports/nightly", func(ctx context.Context, l *client.Lease) error {
		for step := range 3 {
			if err := work(ctx, l.Token()); err != nil {
				return err
			}
			l.Progress(fmt.Sprintf("step %d done", step))
		}
		return nil
	}, client.TTL(15*time.Second), client.Wait(time.Minute))
	if err != nil {
		log.Print(err)
	}
}

func ExampleFailOpen() {
	c, err := client.New(client.Config{Endpoints: []string{"http://127.0.0.1:7420"}})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Only for work that is safe to run twice at once: with the store
	// unreachable this returns a degraded lease (token 0) instead of an error.
	lease, err := c.Acquire(ctx, "cache/warm", client.FailOpen())
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(context.WithoutCancel(ctx))
	if lease.Degraded() {
		log.Print("leasehold unreachable: warming the cache without a lock")
	}
}

func ExampleClient_Leases() {
	c, err := client.New(client.Config{Endpoints: []string{"http://127.0.0.1:7420"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	// Every held lease under jobs/, read a page at a time as the loop goes.
	for l, err := range c.Leases(context.Background(), "jobs/") {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("lease %d token %d on %v by %s, %v left\n", l.ID, l.Token, l.Resources, l.Owner, l.ExpiresIn)
	}
}

func ExampleClient_Close() {
	c, err := client.New(client.Config{
		Endpoints: []string{"http://127.0.0.1:7420"},
		Logger:    slog.Default(), // nil (the default) discards the client's warnings
	})
	if err != nil {
		log.Fatal(err)
	}
	// Close stops renewing the leases still held, which end at once (and
	// expire on the server after their TTL): release them first.
	defer c.Close()
	ctx := context.Background()
	lease, err := c.Acquire(ctx, "reports/nightly")
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(context.WithoutCancel(ctx)) // runs before c.Close
	if err := work(lease.Context(ctx), lease.Token()); err != nil {
		log.Print(err)
	}
}

func ExampleClient_Txn() {
	c, err := client.New(client.Config{Endpoints: []string{"http://127.0.0.1:7420"}})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	// Claim job 7 and set its state in one log entry, only if nobody has
	// claimed it; otherwise note the contention instead.
	res, err := c.Txn(ctx).
		If(client.Absent("jobs/7/owner")).
		Then(client.OpPut("jobs/7/owner", []byte("worker-3")), client.OpPut("jobs/7/state", []byte("running"))).
		Else(client.OpPut("jobs/7/contended", []byte("worker-3"))).
		Commit()
	if err != nil {
		log.Fatal(err) // refused: nothing was written
	}
	fmt.Println("claimed:", res.Succeeded, "at index", res.Index)
}

func ExampleBindLease() {
	c, err := client.New(client.Config{Endpoints: []string{"http://127.0.0.1:7420"}})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	// Service registration: the key lives exactly as long as the lease.
	lease, err := c.Acquire(ctx, "svc/api/node-1", client.TTL(10*time.Second), client.ProgressTimeout(0))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Put(ctx, "alive/api/node-1", []byte("10.0.0.7:8080"), client.BindLease(lease)); err != nil {
		log.Fatal(err)
	}
	for k, err := range c.Keys(ctx, "alive/api/") {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(k.Key, string(k.Value), "lives by lease", k.LeaseID)
	}
}

// A semaphore of 4: up to four encoders at once, each fencing its own slot.
func ExampleSemaphore() {
	c, err := client.New(client.Config{Endpoints: []string{"http://127.0.0.1:7420"}})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	lease, err := c.Acquire(ctx, "jobs/encoders", client.Semaphore(4), client.Wait(time.Minute))
	if err != nil {
		log.Fatal(err) // leasehold.ErrConflict: the name is a lock, or a semaphore of another limit
	}
	defer lease.Release(context.WithoutCancel(ctx))
	// lease.Slot() is "jobs/encoders#1" .. "jobs/encoders#4": the resource
	// the token fences. Guard each slot's output with (Slot, Token).
	fmt.Println(lease.Slot(), lease.Token())
}
