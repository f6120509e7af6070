package main_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/doctor"
)

// doctor against a real node: it renews for the window, reports ordered
// percentiles of real round trips, recommends the TTL the rule gives for
// those numbers, and gives its lease back.
func TestDoctorMeasuresAndRecommends(t *testing.T) {
	n := startNode(t)
	r := n.lhOK("doctor", "--max-pause", "2s", "--window", "1s", "--resource", "doctor/probe", "--json")
	var rep cliout.Doctor
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, r)
	}
	if rep.Renewals < 10 || rep.Failures != 0 {
		t.Fatalf("%d renewals, %d failed in 1s against a healthy node: %+v", rep.Renewals, rep.Failures, rep)
	}
	dur := func(field, s string) time.Duration {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("%s %q is not a Go duration: %v", field, s, err)
		}
		return d
	}
	l := rep.Latency
	p50, p99, p999, most := dur("p50", l.P50), dur("p99", l.P99), dur("p99_9", l.P999), dur("max", l.Max)
	if !(0 < p50 && p50 <= p99 && p99 <= p999 && p999 <= most && most < 10*time.Second) {
		t.Fatalf("percentiles out of order or absurd: %+v", l)
	}
	want, err := doctor.Recommend(doctor.Inputs{MaxPause: 2 * time.Second, RenewP999: p999, RoundTrips: 2,
		Drift: 10 * time.Millisecond, DriftRatio: 0.02})
	if err != nil {
		t.Fatal(err)
	}
	if got := dur("ttl", rep.TTL); got != want.TTL || dur("renew_every", rep.RenewEvery) != cliRound(want.RenewEvery) {
		t.Fatalf("recommends TTL %s, renew every %s for p99.9 %v; the rule gives %v and %v", rep.TTL, rep.RenewEvery, p999, want.TTL, want.RenewEvery)
	}
	if got := dur("ttl", rep.TTL); got < 3*time.Second {
		t.Fatalf("TTL %v for a 2s pause: shorter than the pause over 2/3", got)
	}
	if !strings.Contains(rep.Rule, "renew every TTL/3") || rep.MaxPause != "2s" || rep.Resource != "doctor/probe" {
		t.Fatalf("report: %+v", rep)
	}
	if g, err := n.get("doctor/probe"); err != nil || g.GetHolder() != nil {
		t.Fatalf("doctor left its lease held: %v %v", g, err)
	}

	// The text form says the same, and --max-pause is required.
	txt := n.lhOK("doctor", "--max-pause", "500ms", "--window", "300ms")
	for _, s := range []string{"p99.9", "Recommended: TTL", "renew every"} {
		if !strings.Contains(txt.stdout, s) {
			t.Errorf("doctor's text output lacks %q:\n%s", s, txt.stdout)
		}
	}
	if r := n.lh("doctor", "--window", "300ms"); r.code != 2 || !strings.Contains(r.stderr, "--max-pause is required") {
		t.Errorf("doctor without --max-pause: want exit 2 naming the flag:\n%s", r)
	}
}

// cliRound is how the CLI prints a duration (cliout.Dur), parsed back.
func cliRound(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
