// Package history holds the checkers that judge a recorded history of
// operations against leasehold's invariants: tokens that never repeat and
// follow real time, holders whose safe windows never overlap, fenced writes
// refused once a newer token exists, linearizable KV transactions
// (porcupine), queue keys delivered in order and acknowledged once, and one
// completion per idempotency key.
//
// Each checker takes plain records and returns the violations it found,
// each naming the operations that show it. The fault suite, the
// integration tests and `leasehold torture` all record into these types,
// so there is one copy of every check, and each check has a test that
// feeds it a violation and sees it caught.
package history

import "fmt"

// Violation is one broken invariant: which check found it, what it is, and
// the ids of the recorded operations that show it (if the caller numbered
// its operations).
type Violation struct {
	Check string  `json:"check"`
	Msg   string  `json:"msg"`
	Ops   []int64 `json:"ops,omitempty"`
}

func (v Violation) String() string { return v.Check + ": " + v.Msg }

func violation(check string, ops []int64, format string, args ...any) Violation {
	return Violation{Check: check, Msg: fmt.Sprintf(format, args...), Ops: ops}
}

// The checks, as Violation.Check names them.
const (
	CheckTokenReused    = "token_reused"
	CheckStaleWrite     = "stale_write_accepted"
	CheckOverlap        = "double_owner"
	CheckTTL            = "lapsed_early"
	CheckOrder          = "order_violation"
	CheckAckedTwice     = "acked_twice"
	CheckLost           = "acked_lost"
	CheckCompletedTwice = "completed_twice"
	CheckLinearizable   = "not_linearizable"
	CheckBadRecord      = "bad_record"
)
