package pgfence

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fence"
)

// ErrStaleToken matches every rejection with errors.Is. It is
// leasehold.ErrStaleToken.
var ErrStaleToken = fence.ErrStaleToken

// StaleTokenError is the rejection, with the resource, the offered token and
// the mark that refused it.
type StaleTokenError = fence.StaleTokenError

// MaxToken is the largest token the bigint column stores.
const MaxToken = math.MaxInt64

// DB is what the guard runs its statements on. pgx.Tx, *pgx.Conn and
// *pgxpool.Pool all satisfy it. For Check it must be the caller's own
// transaction, the one that does the protected write: on a pool or a bare
// connection each statement commits on its own, and the check no longer
// protects anything.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Guard checks fencing tokens against a table of high-water marks. The zero
// Guard uses DefaultTable; use New to configure it. A Guard is safe for
// concurrent use.
type Guard struct {
	table    string // as given, validated; "" means DefaultTable
	onReject func(resource string, offered, current uint64)

	create, check, current string // the statements, for this table
}

// Option configures a Guard.
type Option func(*Guard) error

// Table makes the guard use the named table instead of DefaultTable. The
// name is a lower-case SQL identifier ([a-z_][a-z0-9_]*, at most 63 bytes),
// optionally qualified by a schema the same way ("fencing.marks").
func Table(name string) Option {
	return func(g *Guard) error {
		if !validTable(name) {
			return leasehold.Errorf(leasehold.CodeInvalid,
				"pgfence: table name %q is not a lower-case SQL identifier, optionally schema-qualified", name)
		}
		g.table = name
		return nil
	}
}

// OnReject has the guard call fn with each rejection, for example to count
// rejections in the caller's own metrics. fn runs on the checking goroutine
// before Check returns; it must be quick and must not use the transaction.
func OnReject(fn func(resource string, offered, current uint64)) Option {
	return func(g *Guard) error {
		g.onReject = fn
		return nil
	}
}

// New makes a Guard.
func New(opts ...Option) (*Guard, error) {
	g := &Guard{}
	for _, o := range opts {
		if err := o(g); err != nil {
			return nil, err
		}
	}
	g.create, g.check, g.current = statements(g.table)
	return g, nil
}

var identRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

func validTable(name string) bool {
	schema, table, qualified := strings.Cut(name, ".")
	if !qualified {
		return identRE.MatchString(name)
	}
	return identRE.MatchString(schema) && identRE.MatchString(table)
}

// statements returns the SQL of sql.go for table. Names are validated to be
// plain identifiers, so quoting is only needed to keep a reserved word (a
// table named "user") from breaking the statement.
func statements(table string) (create, check, current string) {
	if table == "" || table == DefaultTable {
		return CreateTableSQL, CheckSQL, CurrentSQL
	}
	q := pgx.Identifier(strings.Split(table, ".")).Sanitize()
	r := strings.NewReplacer(DefaultTable, q)
	return r.Replace(CreateTableSQL), r.Replace(CheckSQL), r.Replace(CurrentSQL)
}

func (g *Guard) stmts() (create, check, current string) {
	if g.check == "" { // the zero Guard
		return statements(g.table)
	}
	return g.create, g.check, g.current
}

// TableName is the table the guard uses.
func (g *Guard) TableName() string {
	if g.table == "" {
		return DefaultTable
	}
	return g.table
}

// Migrate creates the default table if it does not exist. See Guard.Migrate.
func Migrate(ctx context.Context, db DB) error {
	return (&Guard{}).Migrate(ctx, db)
}

// Migrate creates the guard's table if it does not exist. It is idempotent
// and safe to run from many processes at once: a transaction-scoped advisory
// lock keyed on the table name serializes concurrent runs, which
// CREATE TABLE IF NOT EXISTS alone does not (two racing creators can fail on
// the catalog's unique index).
func (g *Guard) Migrate(ctx context.Context, db DB) error {
	create, _, _ := g.stmts()
	// Without arguments pgx sends this as one simple-protocol query, which
	// Postgres runs as one implicit transaction, so the lock covers the
	// CREATE. The name is validated, so it is safe inside the literal.
	sql := fmt.Sprintf("SELECT pg_advisory_xact_lock(hashtext('leasehold.fence.%s'));\n%s", g.TableName(), create)
	if _, err := db.Exec(ctx, sql); err != nil {
		return fmt.Errorf("pgfence: migrate %s: %w", g.TableName(), err)
	}
	return nil
}

// Check applies the rule for a write to resource with token, inside tx, the
// caller's transaction that also does the write: if token is >= the
// resource's mark (or the resource has none), the mark is raised to token and
// Check returns nil; otherwise it returns a *StaleTokenError, which matches
// ErrStaleToken, and the caller must roll back.
//
// Call it before the protected write. The check locks the resource's row until
// tx ends, so concurrent writers of the resource queue behind each other, and
// the check and the write commit or roll back together: a rolled-back write
// leaves the mark where it was.
//
// A token above MaxToken, or an invalid resource name, is an error matching
// leasehold.ErrInvalid. Any other error comes from Postgres; the transaction
// is then aborted and must be rolled back too.
func (g *Guard) Check(ctx context.Context, tx DB, resource string, token uint64) error {
	current, ok, err := g.advance(ctx, tx, resource, token)
	if err != nil {
		return err
	}
	if !ok {
		return &StaleTokenError{Resource: resource, Offered: token, Current: current}
	}
	return nil
}

// advance is the rule: it raises resource's mark to token and returns
// (token, true), or returns (mark, false) when token is below the mark.
func (g *Guard) advance(ctx context.Context, db DB, resource string, token uint64) (uint64, bool, error) {
	if err := leasehold.ValidateName("resource name", resource, leasehold.MaxResourceLen, true); err != nil {
		return 0, false, fmt.Errorf("pgfence: %w", err)
	}
	if token > MaxToken {
		return 0, false, leasehold.Errorf(leasehold.CodeInvalid,
			"pgfence: token %d is above %d, the largest token the guard stores", token, uint64(MaxToken))
	}
	_, check, _ := g.stmts()
	var stored int64
	err := db.QueryRow(ctx, check, resource, int64(token)).Scan(&stored)
	if err == nil {
		return uint64(stored), true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, false, fmt.Errorf("pgfence: check %q: %w", resource, err)
	}
	// Stale. The row exists (else the insert would have happened), and this
	// transaction may now hold its lock; read the mark that refused us to
	// report it. Under READ COMMITTED this sees the latest committed mark.
	current, found, err := g.Current(ctx, db, resource)
	if err != nil {
		return 0, false, err
	}
	if !found {
		// Deleted between the two statements: by hand, as nothing here deletes.
		return 0, false, fmt.Errorf("pgfence: check %q: token refused, but the resource's row has vanished", resource)
	}
	if g.onReject != nil {
		g.onReject(resource, token, current)
	}
	return current, false, nil
}

// Claim records a new holder's token at the resource before its first real
// write, so that from then on an ex-holder's late write is refused even
// though the new holder has not written yet (see the package doc for the
// window this closes). The rule is the same as Check's, so a Claim fails with
// a *StaleTokenError if a newer holder got there first: the lease has
// already moved on.
//
// Unlike Check, Claim is meant to commit on its own: run it in a short
// transaction of its own, or directly on a pool (one statement commits by
// itself), and let it commit before starting work.
func (g *Guard) Claim(ctx context.Context, db DB, resource string, token uint64) error {
	return g.Check(ctx, db, resource, token)
}

// Current returns the resource's mark, and false if the resource has none.
func (g *Guard) Current(ctx context.Context, db DB, resource string) (uint64, bool, error) {
	_, _, current := g.stmts()
	var t int64
	err := db.QueryRow(ctx, current, resource).Scan(&t)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("pgfence: read mark of %q: %w", resource, err)
	}
	return uint64(t), true, nil
}
