// Package procs is what the tests that drive the real leasehold binary
// share (cmd/leasehold's end-to-end tests and the faults suite): building
// the binary once per test binary, starting child processes whose output
// goes to files, and waiting for a `leasehold serve` to be ready.
package procs
