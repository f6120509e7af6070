// Package api holds leasehold's protobuf definitions, the generated Connect
// code (in gen/), and the one mapping between leasehold's error codes and
// Connect codes, used by the server and the client alike.
package api

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/leasehold"
)

var toConnect = map[leasehold.Code]connect.Code{
	leasehold.CodeInvalid:         connect.CodeInvalidArgument,
	leasehold.CodeNotFound:        connect.CodeNotFound,
	leasehold.CodeNotHolder:       connect.CodeFailedPrecondition,
	leasehold.CodeHeld:            connect.CodeAlreadyExists,
	leasehold.CodeWaitTimeout:     connect.CodeDeadlineExceeded,
	leasehold.CodeStaleToken:      connect.CodeAborted,
	leasehold.CodeLimit:           connect.CodeResourceExhausted,
	leasehold.CodeUnavailable:     connect.CodeUnavailable,
	leasehold.CodeCanceled:        connect.CodeCanceled,
	leasehold.CodePermission:      connect.CodePermissionDenied,
	leasehold.CodeUnauthenticated: connect.CodeUnauthenticated,
	leasehold.CodeVersionMismatch: connect.CodeAborted,
	leasehold.CodeOutOfRange:      connect.CodeOutOfRange,
	leasehold.CodeConflict:        connect.CodeFailedPrecondition,
}

// codeHeader carries leasehold's own code beside the Connect code, since two
// of ours share Aborted (a stale token and a lost compare-and-swap).
const codeHeader = "Leasehold-Error-Code"

var codeByName = func() map[string]leasehold.Code {
	m := map[string]leasehold.Code{}
	for c := leasehold.CodeUnknown; c <= leasehold.CodeConflict; c++ {
		m[c.String()] = c
	}
	return m
}()

var fromConnect = func() map[connect.Code]leasehold.Code {
	m := make(map[connect.Code]leasehold.Code, len(toConnect))
	for k, v := range toConnect {
		if _, taken := m[v]; !taken && k != leasehold.CodeConflict || k == leasehold.CodeStaleToken {
			m[v] = k
		}
	}
	return m
}()

// ToConnect turns an error from the service into a Connect error whose
// message a person can act on. Errors that are not a *leasehold.Error are
// reported as Internal without their text, which may hold internals.
func ToConnect(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	var le *leasehold.Error
	if errors.As(err, &le) {
		code, ok := toConnect[le.Code]
		if !ok {
			code = connect.CodeUnknown
		}
		ce := connect.NewError(code, errors.New(le.Message))
		ce.Meta().Set(codeHeader, le.Code.String())
		return ce
	}
	switch {
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, errors.New("the request was canceled"))
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, errors.New("the request's deadline passed"))
	}
	return connect.NewError(connect.CodeInternal, errors.New("internal error; see the server log"))
}

// FromConnect turns an error from a Connect call into a *leasehold.Error so
// callers can use errors.Is(err, leasehold.ErrHeld) and friends. Transport
// failures (connect-go reports them as Unavailable) become CodeUnavailable.
func FromConnect(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return &leasehold.Error{Code: leasehold.CodeUnavailable, Message: err.Error()}
	}
	if code, ok := codeByName[ce.Meta().Get(codeHeader)]; ok && code != leasehold.CodeUnknown {
		return &leasehold.Error{Code: code, Message: ce.Message()}
	}
	if code, ok := fromConnect[ce.Code()]; ok {
		return &leasehold.Error{Code: code, Message: ce.Message()}
	}
	return &leasehold.Error{Code: leasehold.CodeUnknown, Message: ce.Message()}
}

// relayedHeaders are the headers of an error answer a node passes on when it
// relays another node's answer: leasehold's own code, and a backoff hint.
var relayedHeaders = []string{codeHeader, "Retry-After"}

// Relayed makes err, an error answer received from another node (a
// forwarded request's), one a handler can return as its own. connect-go
// does not echo a received error's metadata, which holds leasehold's own
// code: without it a lost compare-and-swap would reach the client as a
// stale token (both are Aborted). Other errors are returned unchanged.
func Relayed(err error) error {
	var we *connect.Error
	if !connect.IsWireError(err) || !errors.As(err, &we) {
		return err
	}
	ce := connect.NewError(we.Code(), errors.New(we.Message()))
	for _, d := range we.Details() {
		ce.AddDetail(d)
	}
	for _, h := range relayedHeaders {
		if v := we.Meta().Get(h); v != "" {
			ce.Meta().Set(h, v)
		}
	}
	return ce
}

// ToBatchError is ToConnect for one operation of a Batch: the same Connect
// code, by the name the unary calls and docs/api.md use
// ("invalid_argument", "already_exists", ...), and the same message,
// carried in the result instead of the reply's status.
func ToBatchError(err error) *pb.BatchError {
	ce := ToConnect(err).(*connect.Error)
	return &pb.BatchError{Code: ce.Code().String(), Message: ce.Message(), LeaseholdCode: ce.Meta().Get(codeHeader)}
}

// FromBatchError is FromConnect for one operation's error in a Batch. It
// also reads leasehold's own code names ("held", "not_holder", ...), which
// servers before the Connect names sent.
func FromBatchError(e *pb.BatchError) error {
	if code, ok := codeByName[e.GetLeaseholdCode()]; ok && code != leasehold.CodeUnknown {
		return &leasehold.Error{Code: code, Message: e.GetMessage()}
	}
	var cc connect.Code
	code, ok := leasehold.CodeUnknown, false
	if cc.UnmarshalText([]byte(e.GetCode())) == nil {
		code, ok = fromConnect[cc]
	}
	if !ok {
		code = codeByName[e.GetCode()] // CodeUnknown if not one of ours either
	}
	return &leasehold.Error{Code: code, Message: e.GetMessage()}
}
