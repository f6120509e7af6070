// Command cas shows the single-record race solved without a lock: writers
// read a record with its version and write it back only if the version is
// unchanged (compare-and-swap), retrying on a conflict. No update is lost,
// and no writer ever waits for another to finish its work.
//
//	cas --endpoints http://127.0.0.1:7420 --key counters/visits --increments 100
//	cas --endpoints http://127.0.0.1:7420 --transfer 10 --from accounts/a --to accounts/b
//
// Increment is the one-key case (KV Put with IfVersion); Transfer moves an
// amount between two keys in one transaction whose compares check both
// versions (KV Txn), so the two balances change together or not at all.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// ErrInsufficient is Transfer's refusal to take a balance below zero.
var ErrInsufficient = errors.New("insufficient balance")

// read returns key's integer value (0 when absent) and its version.
func read(ctx context.Context, c *client.Client, key string) (int64, uint64, error) {
	b, v, err := c.GetKey(ctx, key)
	if errors.Is(err, leasehold.ErrNotFound) {
		return 0, 0, nil // version 0: IfVersion(0) means "still absent"
	}
	if err != nil {
		return 0, 0, err
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("%s holds %q, not a number: %w", key, b, err)
	}
	return n, v, nil
}

// Increment adds 1 to the counter at key and returns how many attempts it
// took: a write that finds the version changed re-reads and tries again.
func Increment(ctx context.Context, c *client.Client, key string) (attempts int, err error) {
	for {
		attempts++
		n, v, err := read(ctx, c, key)
		if err != nil {
			return attempts, err
		}
		_, err = c.Put(ctx, key, []byte(strconv.FormatInt(n+1, 10)), client.IfVersion(v))
		if !errors.Is(err, leasehold.ErrVersionMismatch) {
			return attempts, err // nil: written
		}
		// Someone wrote in between: their update stands, ours is redone on it.
	}
}

// Transfer moves amount from one key to another in one transaction that
// applies only if neither key changed since it was read.
func Transfer(ctx context.Context, c *client.Client, from, to string, amount int64) (attempts int, err error) {
	for {
		attempts++
		a, va, err := read(ctx, c, from)
		if err != nil {
			return attempts, err
		}
		b, vb, err := read(ctx, c, to)
		if err != nil {
			return attempts, err
		}
		if a < amount {
			return attempts, fmt.Errorf("%s holds %d, less than %d: %w", from, a, amount, ErrInsufficient)
		}
		res, err := c.Txn(ctx).
			If(client.VersionEquals(from, va), client.VersionEquals(to, vb)).
			Then(client.OpPut(from, []byte(strconv.FormatInt(a-amount, 10))),
				client.OpPut(to, []byte(strconv.FormatInt(b+amount, 10)))).
			Commit()
		if err != nil || res.Succeeded {
			return attempts, err
		}
	}
}

func main() {
	endpoints := flag.String("endpoints", "http://127.0.0.1:7420", "leasehold API URLs, comma-separated")
	key := flag.String("key", "counters/example", "the counter to increment")
	increments := flag.Int("increments", 1, "how many times to increment it")
	transfer := flag.Int64("transfer", 0, "move this amount from --from to --to instead of incrementing")
	from := flag.String("from", "accounts/a", "the account to take --transfer from")
	to := flag.String("to", "accounts/b", "the account to give --transfer to")
	flag.Parse()

	c, err := client.New(client.Config{Endpoints: strings.Split(*endpoints, ",")})
	if err != nil {
		fmt.Fprintln(os.Stderr, "cas:", err)
		os.Exit(1)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if *transfer > 0 {
		attempts, err := Transfer(ctx, c, *from, *to, *transfer)
		if err != nil {
			fmt.Fprintln(os.Stderr, "cas:", err)
			os.Exit(1)
		}
		fmt.Printf("moved %d from %s to %s (%d attempts)\n", *transfer, *from, *to, attempts)
		return
	}
	total := 0
	for range *increments {
		attempts, err := Increment(ctx, c, *key)
		total += attempts
		if err != nil {
			fmt.Fprintln(os.Stderr, "cas:", err)
			os.Exit(1)
		}
	}
	n, _, err := read(ctx, c, *key)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cas:", err)
		os.Exit(1)
	}
	fmt.Printf("%s = %d (%d increments in %d attempts)\n", *key, n, *increments, total)
}
