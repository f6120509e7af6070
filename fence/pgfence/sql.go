package pgfence

// The plain-SQL form of the guard, for the default table. The Guard runs
// exactly these statements (with the table name replaced when configured), so
// a program in any language that runs them gets the same protection.
//
// Tokens are stored as bigint. leasehold's tokens are Raft log indexes,
// which will not pass 2^63-1 (that is 292 years at a billion grants a
// second), and bigint keeps the column cheap and easy to compare from every
// language. The Guard refuses a token above math.MaxInt64 with an error
// rather than storing it wrongly; numeric(20,0) would hold the whole uint64
// range but make every client deal with a decimal type for nothing.
const (
	// DefaultTable is the table the Guard uses unless told otherwise.
	DefaultTable = "leasehold_fence"

	// CreateTableSQL creates the table, one row per resource. It is
	// idempotent.
	CreateTableSQL = `CREATE TABLE IF NOT EXISTS leasehold_fence (
	resource   text        PRIMARY KEY,
	token      bigint      NOT NULL CHECK (token >= 0),
	updated_at timestamptz NOT NULL DEFAULT now()
)`

	// CheckSQL is the check, with $1 the resource and $2 the token. Run it
	// inside the transaction that does the protected write, before that
	// write. It returns one row (the token, now the resource's mark) when the
	// token is accepted and zero rows when it is stale; on zero rows, roll the
	// transaction back.
	//
	// It is correct under READ COMMITTED with concurrent writers: when the
	// row exists, ON CONFLICT locks its latest committed version and only
	// then evaluates the WHERE, so a writer that waited behind a newer token
	// sees that token, not the one its snapshot held. When two writers
	// insert the first row at once, one waits for the other's insert to
	// commit and then takes the update path. The row lock is held to the end
	// of the transaction, which is what makes the check and the protected
	// write one atomic step. Under REPEATABLE READ or SERIALIZABLE a
	// concurrent check fails with SQLSTATE 40001 instead; retry the
	// transaction as for any serialization failure.
	CheckSQL = `INSERT INTO leasehold_fence AS f (resource, token, updated_at)
VALUES ($1, $2, now())
ON CONFLICT (resource) DO UPDATE
	SET token = excluded.token, updated_at = excluded.updated_at
	WHERE f.token <= excluded.token
RETURNING f.token`

	// CurrentSQL reads a resource's mark, with $1 the resource: to report
	// what refused a stale token, or for inspection.
	CurrentSQL = `SELECT token FROM leasehold_fence WHERE resource = $1`
)
