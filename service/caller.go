package service

import "context"

// Caller is who sent a request, as the API front authenticated it. Every
// method of the service reads it from its context (WithCaller): it
// scopes the request IDs, secrets and consumer names the service puts
// into the commands it builds, and names the actor of an audited change.
type Caller struct {
	// Name is the authenticated identity, or "" when the node runs
	// without auth, where a lease's secret alone tells callers apart.
	Name string
	// Actor names the caller in the audit log and the node's log: Name,
	// or "anonymous" without auth.
	Actor string
}

// anonymous is the caller of a context that carries none.
var anonymous = Caller{Actor: "anonymous"}

type callerKey struct{}

// WithCaller is ctx carrying c. The API front sets it from the
// credentials it checked, never from a request's body, so that no caller
// can speak for another.
func WithCaller(ctx context.Context, c Caller) context.Context {
	if c.Actor == "" {
		c.Actor = anonymous.Actor
	}
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerOf is the caller ctx carries: without one, an anonymous caller.
func CallerOf(ctx context.Context) Caller {
	if c, ok := ctx.Value(callerKey{}).(Caller); ok {
		return c
	}
	return anonymous
}
