// Package faults is leasehold's standing fault suite: it drives real
// `leasehold serve` processes and real clients, injects faults (signals to
// the leader, a follower and a client process; damage to the log files; a
// full disk; another caller's request ids; slow, oversized and malformed
// requests) and reports, per scenario, acknowledged writes lost, tokens
// reused, stale writes accepted and unauthorized operations accepted,
// computed from the history of acknowledged operations against the state
// read back afterwards.
//
// `go test ./faults` runs the short suite (CI); scripts/faults runs the
// full one (LEASEHOLD_FAULTS=full: more rounds, longer load). The package
// holds only tests; this file is its documentation.
package faults
