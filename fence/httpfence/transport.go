package httpfence

import (
	"errors"
	"fmt"
	"net/http"
)

// TokenSource gives the token to send. A leasehold client lease
// (*client.Lease) is one.
type TokenSource interface {
	Token() uint64
}

// TokenFunc makes a function a TokenSource.
type TokenFunc func() uint64

// Token returns f().
func (f TokenFunc) Token() uint64 { return f() }

// ErrZeroToken is returned by Transport for a token of 0, which a degraded
// lease carries (client.FailOpen during a store outage): it proves nothing,
// so the Transport will not present it as if it did.
var ErrZeroToken = errors.New("httpfence: token is 0 (a degraded lease); not sending the request")

// Transport is an http.RoundTripper that adds a Leasehold-Fence header with
// Resource and Source's current token to every request. The caller's request
// is not modified.
type Transport struct {
	Base     http.RoundTripper // nil means http.DefaultTransport
	Resource string
	Source   TokenSource

	// AllowZeroToken sends token 0 instead of failing with ErrZeroToken, for
	// a deliberate fail-open client talking to a resource that accepts it.
	AllowZeroToken bool
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.Source == nil {
		return nil, closeBody(req, errors.New("httpfence: Transport has no Source"))
	}
	token := t.Source.Token()
	if token == 0 && !t.AllowZeroToken {
		return nil, closeBody(req, ErrZeroToken)
	}
	v, err := Format(t.Resource, token)
	if err != nil {
		return nil, closeBody(req, fmt.Errorf("httpfence: %w", err))
	}
	req = req.Clone(req.Context())
	req.Header.Set(HeaderName, v)
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(req)
}

// closeBody closes the request body, as a RoundTripper must even when it
// fails, and returns err.
func closeBody(req *http.Request, err error) error {
	if req.Body != nil {
		req.Body.Close()
	}
	return err
}
