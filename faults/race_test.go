//go:build race

package faults

// raceEnabled: the suite runs under the race detector, so the leasehold
// binary under test is built with -race too.
const raceEnabled = true
