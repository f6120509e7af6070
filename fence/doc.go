// Package fence holds what the resource-side fencing packages share: the
// rule, and the error a guard returns when a token breaks it.
//
// # Why fencing
//
// A lease tells a worker it may start; it cannot stop a worker that has been
// paused (a GC pause, a stalled VM, a slow network) past its lease's end and
// then carries on as if it still held it. Meanwhile leasehold has granted the
// lease to someone else, so two workers now write. Every lease carries a
// fencing token, and tokens of successive holders of a resource strictly
// increase. If the protected resource itself refuses writes with a token
// older than one it has already accepted, the paused worker's late writes
// bounce off instead of undoing the new holder's work.
//
// # The rule
//
// A guard keeps, per resource, the high-water mark: the largest token it has
// accepted. It accepts a write iff the write's token is >= that mark, and
// raises the mark to the token as it accepts. Equal tokens pass because one
// holder writes many times with the same token. The check and the raise are
// one atomic step, so of two racing writers the older can never pass after
// the newer did.
//
// # The window, and Claim
//
// The mark only knows tokens the resource has seen. Say holder A (token 5)
// wrote, then stalled; its lease expired and B got token 7 but has not
// written yet. A wakes and writes with 5: the mark is 5, so it passes. Its
// write lands although A no longer holds the lease. Once B writes, A is
// fenced off, but the write in between got through.
//
// A new holder closes most of that window by claiming the resource: recording
// its token at the resource (pgfence.Guard.Claim, or any fenced request with
// the new token) right after acquiring the lease and before starting work.
// What remains is the moment between the grant and the claim. Only asking
// leasehold at write time whether the token is still the current one
// (leasehold's own CheckFence, the strong form) closes it entirely, at the
// cost of a round trip to leasehold on every write.
//
// Choosing:
//   - pgfence.Guard.Check, in the same transaction as every protected write:
//     always, for a Postgres resource.
//   - pgfence.Guard.Claim, committed right after acquiring a lease: when an
//     ex-holder's late write in the window above would do harm.
//   - leasehold's CheckFence: when no late write may land at all and the
//     round trip is affordable, or the resource cannot store a mark.
//
// # Token 0
//
// Real tokens are Raft log indexes and start at 1. A degraded lease
// (client.FailOpen during a store outage) carries token 0. Guards apply the
// rule to 0 like any other token, so 0 passes only while the resource has
// accepted nothing higher; the HTTP client refuses to send it unless told to.
//
// # Packages
//
// fence/pgfence checks tokens inside the caller's Postgres transaction, and
// documents the same check as one plain SQL statement for other languages.
// fence/httpfence carries tokens in a Leasehold-Fence header, checks them in
// a middleware, and adds them on the client side with a RoundTripper.
package fence
