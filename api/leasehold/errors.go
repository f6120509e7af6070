package leasehold

import (
	"errors"
	"fmt"
)

// Code classifies an error for the API edge. Each code maps to exactly one
// Connect code (api.ToConnect, package api's errors.go, which the node's
// interceptor and handlers use) and back again (api.FromConnect, which the
// client uses).
type Code uint8

const (
	CodeUnknown         Code = iota
	CodeInvalid              // bad input: InvalidArgument
	CodeNotFound             // lease or resource unknown: NotFound
	CodeNotHolder            // wrong secret, or not the current holder: FailedPrecondition
	CodeHeld                 // resource held by another lease and no wait: AlreadyExists
	CodeWaitTimeout          // waited the whole bound without a grant: DeadlineExceeded
	CodeStaleToken           // fencing token older than the current one: Aborted
	CodeLimit                // over a configured limit: ResourceExhausted
	CodeUnavailable          // no leader or no quorum: Unavailable
	CodeCanceled             // the request was withdrawn: Canceled
	CodePermission           // authenticated but not allowed: PermissionDenied
	CodeUnauthenticated      // no or bad credentials: Unauthenticated
	CodeVersionMismatch      // a compare-and-swap found another version: Aborted
	CodeOutOfRange           // a watch from an index older than the node keeps: OutOfRange
	CodeConflict             // a name in use as another kind (lock, semaphore, limit): FailedPrecondition
)

var codeNames = [...]string{"unknown", "invalid", "not_found", "not_holder", "held",
	"wait_timeout", "stale_token", "limit", "unavailable", "canceled", "permission", "unauthenticated",
	"version_mismatch", "out_of_range", "conflict"}

func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("code(%d)", c)
}

// Sentinels. Wrap them with %w (or use Errorf) to add detail; compare with
// errors.Is.
var (
	ErrInvalid         = &Error{Code: CodeInvalid, Message: "invalid argument"}
	ErrNotFound        = &Error{Code: CodeNotFound, Message: "not found"}
	ErrNotHolder       = &Error{Code: CodeNotHolder, Message: "not the holder of this lease"}
	ErrHeld            = &Error{Code: CodeHeld, Message: "resource is held"}
	ErrWaitTimeout     = &Error{Code: CodeWaitTimeout, Message: "wait bound elapsed"}
	ErrStaleToken      = &Error{Code: CodeStaleToken, Message: "stale fencing token"}
	ErrLimit           = &Error{Code: CodeLimit, Message: "limit exceeded"}
	ErrUnavailable     = &Error{Code: CodeUnavailable, Message: "store unavailable"}
	ErrCanceled        = &Error{Code: CodeCanceled, Message: "canceled"}
	ErrPermission      = &Error{Code: CodePermission, Message: "permission denied"}
	ErrUnauthenticated = &Error{Code: CodeUnauthenticated, Message: "unauthenticated"}
	ErrVersionMismatch = &Error{Code: CodeVersionMismatch, Message: "version mismatch"}
	ErrOutOfRange      = &Error{Code: CodeOutOfRange, Message: "index out of range"}
	ErrConflict        = &Error{Code: CodeConflict, Message: "name in use as another kind"}
)

// Error is the one error type that crosses package boundaries. Message is
// safe to show to a person: it never contains a secret.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return e.Message }

// Is makes every *Error with the same code match its sentinel, so an error
// decoded from the wire still satisfies errors.Is(err, leasehold.ErrHeld).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf makes an *Error with the given code and a formatted message.
func Errorf(code Code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of the first *Error in err's chain, or CodeUnknown.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeUnknown
}
