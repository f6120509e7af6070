package client

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/leasehold/leasehold/api"
)

// onSession sends a unary call's request msg on the session stream, if the
// client has one open or can open one, and returns its answer; ok false
// says the call goes as a unary call (no session, a request the stream
// does not carry, or no stream to be had). An op unanswered when its
// stream breaks is sent again, with the same request, on the next stream:
// the request IDs and secrets it carries make the retry act once, as a
// unary retry does.
func onSession[Res any](ctx context.Context, c *Client, msg any) (res *Res, ok bool, err error) {
	s := c.session
	if s == nil {
		return nil, false, nil
	}
	m, isProto := msg.(proto.Message)
	if !isProto {
		return nil, false, nil
	}
	// The procedure table (package api) says which calls the stream
	// carries, and in which field: Extend, with no request ID to make a
	// resend act once, is not one of them. A Begin or a Receive with a
	// wait may wait past RequestTimeout.
	op, waits := api.SessionOpOf(m)
	if op == nil {
		return nil, false, nil
	}
	r, err := s.doOp(ctx, op, waits)
	switch {
	case errors.Is(err, errNoSession):
		return nil, false, nil
	case err != nil:
		if ra := r.GetRetryAfter(); ra != nil {
			err = &RetryAfterError{RetryAfter: max(dur(ra.RetryAfter), minRetryAfter), Err: err}
		}
		return nil, true, err
	}
	res, ok = any(api.AnswerOf(r)).(*Res)
	if !ok || res == nil {
		return nil, true, fmt.Errorf("leasehold: the node answered a %T on the session stream with %v", msg, r)
	}
	return res, true, nil
}
