//go:build race

package main_test

// raceEnabled: the test binary runs under the race detector, so the
// leasehold binary under test is built with -race too (it reuses the
// race-built packages already in the build cache, and a data race in a
// child process shows up in its log).
const raceEnabled = true
