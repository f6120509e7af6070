package server

import (
	"context"

	"github.com/leasehold/leasehold/service"
)

// caller is the identity that scopes the request IDs and consumer names a
// request carries: the authenticated token's name, or "" when the node
// runs without auth, where the secret's hash alone tells callers apart.
// The guard put it into the context from the credentials it checked
// (service.WithCaller), never from the request body, so no caller can
// speak for another; the service builds its commands with it.
func caller(ctx context.Context) string { return service.CallerOf(ctx).Name }
