package server

import "context"

// caller is the identity that scopes the request IDs a request carries
// (service.Acquire.Caller): the authenticated token's name, or "" when the
// node runs without auth, where the secret's hash alone tells callers
// apart. It is taken from the credentials checked by the guard, never from
// the request body, so no caller can speak for another.
func caller(ctx context.Context) string {
	if p, ok := ctx.Value(principalKey{}).(Principal); ok && p.Name != anonymous.Name {
		return p.Name
	}
	return ""
}
