// Package httpfence carries fencing tokens over HTTP: a request header, a
// server middleware that enforces the rule, and a client RoundTripper that
// adds the header.
//
// # The header
//
//	Leasehold-Fence: resource=reports/nightly; token=4711
//
// The value is two parameters, resource and token, separated by ";". The
// token is a decimal uint64. The resource name (any name
// leasehold.ValidateName accepts, so any printable UTF-8 up to 256 bytes) is
// percent-encoded: letters, digits and "-._~/:@" are written as they are,
// every other byte as %XX of its UTF-8 encoding. So ";", "=", ",", spaces,
// quotes and "%" never appear raw, the value is plain ASCII that no proxy
// mangles, and path-like names stay readable:
//
//	"orders/42"       → resource=orders/42
//	"batch; id=7"     → resource=batch%3B%20id%3D7
//	"café"            → resource=caf%C3%A9
//
// Percent-encoding was chosen over an RFC 9110 quoted-string because a
// quoted-string would carry non-ASCII names as raw bytes, which HTTP only
// tolerates as obsolete text. Parse(Format(r, t)) always returns r and t.
//
// # The server
//
// Middleware checks the header before the handler runs, against a Store of
// per-resource high-water marks: it passes a request on iff the token is >=
// every token accepted before for that resource, raising the mark as it
// accepts. Missing or malformed headers get 400, stale tokens 409 with a JSON
// body naming the resource and both tokens. Raising the mark on accept,
// before the handler's write, means the check and the write are not atomic;
// see Middleware for when to check inside the write instead.
//
// MemoryStore serves one process; pgfence.Store keeps marks in Postgres (each
// Advance in its own transaction) and satisfies Store without this package
// depending on a database driver.
//
// # The client
//
//	lease, _ := c.Acquire(ctx, "reports/nightly")
//	hc := &http.Client{Transport: &httpfence.Transport{
//		Resource: "reports/nightly",
//		Source:   lease, // anything with Token() uint64
//	}}
//
// Transport refuses to send token 0, the token of a degraded lease, unless
// AllowZeroToken is set. Servers apply the rule to 0 like to any token: it
// passes only while the resource has accepted nothing higher.
package httpfence
