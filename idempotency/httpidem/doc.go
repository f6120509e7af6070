// Package httpidem makes a net/http handler idempotent with the
// Idempotency-Key request header (IETF draft "The Idempotency-Key HTTP
// Header Field"), backed by leasehold's idempotency keys.
//
//	h := httpidem.Middleware(httpidem.Config{Client: c, Prefix: "payments/", Required: true}, payments)
//
// For each request with the header, the middleware begins an attempt on
// Prefix+key with a fingerprint of the request (by default a hash of its
// method, path and body):
//
//   - the first request runs the handler, with the attempt's fencing token
//     in its context (Token), and the response (status, the headers in
//     Config.Headers, body) is stored as the key's result;
//   - a later request with the same key and payload gets that stored
//     response again, marked with "Idempotency-Replayed: true";
//   - a request while another with the same key runs gets 409 Conflict;
//   - the key reused with another payload gets 422 Unprocessable Content;
//   - a missing key where one is required gets 400 Bad Request.
//
// Error bodies are RFC 9457 problem details (application/problem+json). A
// response the handler marks as worth retrying (5xx by default, see
// Config.Retryable) is not stored: the attempt is abandoned, so a retry
// runs the handler again.
//
// The effect is exactly-once only if the handler's own write is fenced
// with Token(ctx) (pgfence in the same transaction, or httpfence on an
// outbound call: TokenSource(ctx) is an httpfence.Transport Source) or is
// itself idempotent: a handler that outlives its attempt (paused past the
// attempt TTL while a retry took over) would otherwise apply its effect
// twice. It composes with httpfence.Middleware as an inner handler.
package httpidem
