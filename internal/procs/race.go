//go:build race

package procs

// raceEnabled: the test binary runs under the race detector, so the
// binary under test is built with -race too (a data race in a child then
// shows up in its log).
const raceEnabled = true
