// Package cliout holds the structures the leasehold CLI prints with --json
// (or -o json), one per kind of thing shown, and the two formatting rules
// every command shares. They are the CLI's stable output: field names are
// snake_case and mean the same thing in every command (a lease id is always
// lease_id); ids, tokens and counts are JSON numbers; times are RFC 3339
// UTC strings with milliseconds; durations are Go duration strings rounded
// to the millisecond. A field that the server did not set is left out.
// docs/cli-json.md documents them for people; tests decode every command's
// output into them with unknown fields refused.
package cliout

import "time"

// TimeLayout is how every time is printed in JSON: RFC 3339, UTC, with
// milliseconds ("2026-12-01T09:00:00.123Z").
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// Time formats t for JSON, "" (left out) when t is zero.
func Time(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(TimeLayout)
}

// Dur formats d the one way both human and JSON output show durations:
// rounded to the millisecond, in Go's duration syntax ("1m30.5s").
func Dur(d time.Duration) string { return d.Round(time.Millisecond).String() }

// DurSet is Dur(d), or "" (left out) when d is 0, meaning unset.
func DurSet(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return Dur(d)
}

// DurIf is Dur(d) when it is known, else "" (left out).
func DurIf(d time.Duration, known bool) string {
	if !known {
		return ""
	}
	return Dur(d)
}
