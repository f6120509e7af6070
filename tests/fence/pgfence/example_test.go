package pgfence_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/fence/pgfence"
)

// exampleConn stands for the application's *pgxpool.Pool, which the guard
// accepts the same way. Each example gets a database of its own.
func exampleConn(ctx context.Context) *pgx.Conn {
	conn, err := pgx.Connect(ctx, exampleDatabase(ctx))
	if err != nil {
		log.Fatal(err)
	}
	return conn
}

func ExampleGuard_Check() {
	ctx := context.Background()
	db := exampleConn(ctx)
	defer db.Close(ctx)

	guard, err := pgfence.New()
	if err != nil {
		log.Fatal(err)
	}
	if err := guard.Migrate(ctx, db); err != nil {
		log.Fatal(err)
	}
	if _, err := db.Exec(ctx, "CREATE TABLE IF NOT EXISTS balances (account int PRIMARY KEY, amount int)"); err != nil {
		log.Fatal(err)
	}

	// deposit is the protected write: the check and the write share one
	// transaction, so they commit or roll back together.
	deposit := func(token uint64, amount int) error {
		tx, err := db.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if err := guard.Check(ctx, tx, "accounts/7", token); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO balances VALUES (7, $1)
			ON CONFLICT (account) DO UPDATE SET amount = balances.amount + $1`, amount); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}

	fmt.Println(deposit(12, 100)) // the current holder, token 12
	fmt.Println(deposit(12, 100)) // the same holder again
	err = deposit(11, 100)        // an ex-holder, woken from a pause
	fmt.Println(err)
	fmt.Println(errors.Is(err, pgfence.ErrStaleToken))

	var amount int
	if err := db.QueryRow(ctx, "SELECT amount FROM balances WHERE account = 7").Scan(&amount); err != nil {
		log.Fatal(err)
	}
	fmt.Println(amount)
	// Output:
	// <nil>
	// <nil>
	// stale fencing token for resource "accounts/7": offered 11, current 12
	// true
	// 200
}

// A new holder claims the resource right after acquiring its lease, so an
// ex-holder's late write fails even before the new holder's first write.
func ExampleGuard_Claim() {
	ctx := context.Background()
	db := exampleConn(ctx)
	defer db.Close(ctx)
	guard := &pgfence.Guard{} // the zero Guard uses the default table
	if err := guard.Migrate(ctx, db); err != nil {
		log.Fatal(err)
	}

	// The old holder (token 20) has written before.
	if err := guard.Claim(ctx, db, "exports/daily", 20); err != nil {
		log.Fatal(err)
	}

	// The new holder got token 21. One statement on a pool or connection
	// commits by itself.
	if err := guard.Claim(ctx, db, "exports/daily", 21); err != nil {
		log.Fatal(err)
	}

	// The old holder's late write now fails.
	tx, err := db.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var stale *pgfence.StaleTokenError
	if errors.As(guard.Check(ctx, tx, "exports/daily", 20), &stale) {
		fmt.Printf("refused token %d: resource is at %d\n", stale.Offered, stale.Current)
	}
	// Output:
	// refused token 20: resource is at 21
}

// Count rejections in the application's own metrics, and keep the marks in a
// table of the application's schema.
func ExampleOnReject() {
	ctx := context.Background()
	db := exampleConn(ctx)
	defer db.Close(ctx)

	rejected := map[string]int{} // a prometheus.CounterVec in real life
	guard, err := pgfence.New(
		pgfence.Table("public.fence_marks"),
		pgfence.OnReject(func(resource string, offered, current uint64) {
			rejected[resource]++
		}),
	)
	if err != nil {
		log.Fatal(err)
	}
	if err := guard.Migrate(ctx, db); err != nil {
		log.Fatal(err)
	}
	for _, token := range []uint64{5, 4, 6, 5} {
		guard.Claim(ctx, db, "queue/1", token)
	}
	fmt.Println(rejected["queue/1"])
	// Output:
	// 2
}
