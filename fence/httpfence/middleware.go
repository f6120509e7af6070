package httpfence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fence"
)

// Store keeps the high-water marks the middleware checks against.
//
// Advance applies the rule atomically: if token is >= resource's mark, or the
// resource has none, it raises the mark to token and returns (token, true,
// nil); otherwise it returns (mark, false, nil) and changes nothing.
// MemoryStore keeps marks in memory; pgfence.Store keeps them in Postgres,
// shared by every replica of a service.
type Store interface {
	Advance(ctx context.Context, resource string, token uint64) (current uint64, ok bool, err error)
}

// Option configures the middleware.
type Option func(*config)

type config struct {
	onReject func(resource string, offered, current uint64)
	onError  func(r *http.Request, err error)
	resource func(r *http.Request) string
}

// OnReject has the middleware call fn with each stale token it refuses, for
// example to count them in the caller's own metrics. (A pgfence.Store with a
// Guard that has its own OnReject reports the same rejection there too.)
func OnReject(fn func(resource string, offered, current uint64)) Option {
	return func(c *config) { c.onReject = fn }
}

// OnError has the middleware call fn with each Store error, which it answers
// with 503 and does not otherwise report.
func OnError(fn func(r *http.Request, err error)) Option {
	return func(c *config) { c.onError = fn }
}

// RequireResource names the resource a request writes; the middleware then
// refuses (400) a request whose header names another one. Without it, a
// client holding a lease on resource A could pass the fence of resource B
// with A's larger token. An empty name leaves the request unchecked.
func RequireResource(fn func(r *http.Request) string) Option {
	return func(c *config) { c.resource = fn }
}

// ErrorBody is the JSON body of the middleware's error responses. Error is
// "invalid" (400: missing or malformed header), "stale_token" (409) or
// "unavailable" (503: the Store failed). Resource, Offered and Current are
// set for "stale_token" only.
type ErrorBody struct {
	Error    string `json:"error"`
	Resource string `json:"resource,omitempty"`
	Offered  uint64 `json:"offered"`
	Current  uint64 `json:"current"`
	Message  string `json:"message"`
}

// Middleware checks the Leasehold-Fence header of every request before the
// handler sees it: a request is passed on iff its token is >= every token
// accepted before for its resource, and accepting it raises the resource's
// mark to its token. Otherwise it answers itself:
//
//   - 400 {"error":"invalid", "message":...} when the header is missing,
//     repeated, malformed, or names a resource other than RequireResource's;
//   - 409 {"error":"stale_token", "resource":..., "offered":N, "current":N,
//     "message":...} when the token is below the mark;
//   - 503 {"error":"unavailable", "message":...} when the Store fails.
//
// The handler can read the accepted Fence with FromContext.
//
// The mark is raised before the handler runs, and it stays raised whether
// the handler's write succeeds or not. That is safe (a mark only ever moves
// to a token some holder really had), but the check and the write are not
// one atomic step: a slow handler of an older token can still be writing
// when a newer token's request is accepted. When that matters, check inside
// the write itself (pgfence.Guard.Check in the write's transaction).
func Middleware(store Store, opts ...Option) func(http.Handler) http.Handler {
	var c config
	for _, o := range opts {
		o(&c)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			values := r.Header.Values(HeaderName)
			switch len(values) {
			case 0:
				writeInvalid(w, fmt.Sprintf("missing %s header", HeaderName))
				return
			case 1:
			default:
				writeInvalid(w, fmt.Sprintf("%d %s headers; send one", len(values), HeaderName))
				return
			}
			f, err := Parse(values[0])
			if err != nil {
				writeInvalid(w, err.Error())
				return
			}
			if c.resource != nil {
				if want := c.resource(r); want != "" && want != f.Resource {
					writeInvalid(w, fmt.Sprintf("%s header names resource %q, but this request writes %q",
						HeaderName, f.Resource, want))
					return
				}
			}
			current, ok, err := store.Advance(r.Context(), f.Resource, f.Token)
			if err != nil {
				if errors.Is(err, leasehold.ErrInvalid) {
					// Valid here but not to the store, e.g. a token above
					// pgfence.MaxToken.
					writeInvalid(w, err.Error())
					return
				}
				if c.onError != nil {
					c.onError(r, err)
				}
				writeJSON(w, http.StatusServiceUnavailable, struct {
					Error   string `json:"error"`
					Message string `json:"message"`
				}{leasehold.CodeUnavailable.String(), "fence store unavailable"})
				return
			}
			if !ok {
				if c.onReject != nil {
					c.onReject(f.Resource, f.Token, current)
				}
				st := &fence.StaleTokenError{Resource: f.Resource, Offered: f.Token, Current: current}
				writeJSON(w, http.StatusConflict, ErrorBody{
					Error:    leasehold.CodeStaleToken.String(),
					Resource: f.Resource,
					Offered:  f.Token,
					Current:  current,
					Message:  st.Error(),
				})
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), fenceKey{}, f)))
		})
	}
}

type fenceKey struct{}

// FromContext returns the fence the middleware accepted for this request.
func FromContext(ctx context.Context) (Fence, bool) {
	f, ok := ctx.Value(fenceKey{}).(Fence)
	return f, ok
}

func writeInvalid(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusBadRequest, struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}{leasehold.CodeInvalid.String(), msg})
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	// The status is sent; a failed write means the client went away.
	_ = json.NewEncoder(w).Encode(body)
}
