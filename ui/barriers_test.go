package ui_test

import (
	"net/http"
	"strings"
	"testing"
)

// The barriers view shows each barrier's kind, phase and count, and how
// its last phase ended: a trip with its token, a broken phase flagged.
func TestDashboardBarriers(t *testing.T) {
	n := startAuthNode(t)
	for _, c := range []struct{ proc, body string }{
		{"Create", `{"name":"jobs/load","kind":"BARRIER_KIND_CYCLIC","parties":3,"timeout":"600s"}`},
		{"Arrive", `{"name":"jobs/load","participant":"w1"}`},
		{"Create", `{"name":"jobs/done","kind":"BARRIER_KIND_LATCH","parties":1}`},
		{"CountDown", `{"name":"jobs/done"}`},
		{"Reset", `{"name":"jobs/load"}`},
	} {
		if status, body := call(t, n, workerTok, "/leasehold.v1.Barriers/"+c.proc, c.body, nil); status != http.StatusOK {
			t.Fatalf("%s: HTTP %d %s", c.proc, status, body)
		}
	}
	status, body := get(t, n, operatorTok, "/ui/barriers")
	if status != http.StatusOK {
		t.Fatalf("barriers: HTTP %d", status)
	}
	for _, want := range []string{"jobs/load", "cyclic", "0 of 3", `<span class="bad">phase 1 reset</span>`, "10m",
		"jobs/done", "latch", "tripped", "phase 1 tripped"} {
		if !strings.Contains(body, want) {
			t.Errorf("the barriers view lacks %q:\n%s", want, body)
		}
	}
	if _, body := get(t, n, operatorTok, "/ui/barriers?prefix=other/"); strings.Contains(body, "jobs/load") {
		t.Error("the barriers view ignores its prefix")
	}
}
