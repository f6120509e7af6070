package testutil

import (
	"context"
	"net/http"

	"connectrpc.com/connect"
)

// SetHeaders is a client interceptor that calls set on the request
// headers of every call, unary or streaming (a bearer token, or headers a
// test forges).
func SetHeaders(set func(http.Header)) connect.Interceptor { return headerSetter(set) }

type headerSetter func(http.Header)

func (f headerSetter) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		f(req.Header())
		return next(ctx, req)
	}
}

func (f headerSetter) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		f(conn.RequestHeader())
		return conn
	}
}

func (headerSetter) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
