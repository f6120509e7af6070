// Package procs is what the tests that drive the real leasehold binary
// share (cmd/leasehold's end-to-end tests, the faults suite, the examples'
// fault tests): building the binary (or an example's command) once per
// test binary, starting child processes whose output goes to files,
// waiting for a `leasehold serve` to be ready, and starting a 3-node
// `serve` cluster (on loopback, or on hosts of the tests' choosing: in
// network namespaces, say).
package procs
