package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseDurationTakesDays(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"0", 0},
		{"90s", 90 * time.Second},
		{"1h30m", 90 * time.Minute},
		{"1d", 24 * time.Hour},
		{"1d12h", 36 * time.Hour},
		{"1.5d", 36 * time.Hour},
		{"2d3h4m5s", 51*time.Hour + 4*time.Minute + 5*time.Second},
		{"250ms", 250 * time.Millisecond},
		{"-1d", -24 * time.Hour},
	} {
		got, err := parseDuration(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseDurationExplainsBadInput(t *testing.T) {
	for _, in := range []string{"", "1x", "d", "1d2", "10", "abc", "1h 30m", "1..5d"} {
		_, err := parseDuration(in)
		if err == nil {
			t.Errorf("parseDuration(%q) accepted it", in)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "1d12h") || strings.Contains(msg, "time.") || strings.Contains(msg, "durationpb") {
			t.Errorf("parseDuration(%q): %q; want an example and no Go type names", in, msg)
		}
	}
}

// TestDurationFlagErrorNamesTheFlag: a malformed value is a usage error
// that names the flag and shows an example.
func TestDurationFlagErrorNamesTheFlag(t *testing.T) {
	root := newRoot()
	root.SetArgs([]string{"audit", "--since", "yesterday"})
	root.SetOut(new(strings.Builder))
	root.SetErr(new(strings.Builder))
	err := root.Execute()
	if code := exitCode(err); code != exitUsage {
		t.Fatalf("audit --since yesterday: exit %d (%v), want %d", code, err, exitUsage)
	}
	if msg := err.Error(); !strings.Contains(msg, "--since") || !strings.Contains(msg, "1d12h") {
		t.Errorf("audit --since yesterday: %q; want the flag's name and an example", msg)
	}
}
