//go:build !race

package main_test

// raceEnabled: see e2e_race_test.go.
const raceEnabled = false
