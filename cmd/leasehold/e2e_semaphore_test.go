package main_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
)

// acquire --limit 2 grants two slots, refuses a third and a plain lock
// on the name; status shows the semaphore's slots; run --limit gives its
// child the slot to fence as LEASEHOLD_RESOURCE.
func TestCLISemaphore(t *testing.T) {
	n := startNode(t)
	var got []cliout.Acquired
	for range 2 {
		r := n.lhOK("acquire", "--json", "--limit", "2", "--ttl", "1m", "jobs/pool")
		var a cliout.Acquired
		dec := json.NewDecoder(strings.NewReader(r.stdout))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			t.Fatalf("acquire --limit --json output %q: %v", r.stdout, err)
		}
		got = append(got, a)
	}
	if got[0].Slot != "jobs/pool#1" || got[1].Slot != "jobs/pool#2" || got[0].Limit != 2 || got[1].Resources[0] != "jobs/pool#2" {
		t.Fatalf("two semaphore acquires: %+v", got)
	}
	if r := n.lh("acquire", "--limit", "2", "jobs/pool"); r.code == 0 || !strings.Contains(r.stderr, "all 2 slots held") {
		t.Fatalf("a third holder: %s", r)
	}
	if r := n.lh("acquire", "jobs/pool"); r.code == 0 || !strings.Contains(r.stderr, "is a semaphore with limit 2") {
		t.Fatalf("a lock on the semaphore's name: %s", r)
	}
	s := n.status("jobs/pool")
	if s.Limit != 2 || len(s.Slots) != 2 || s.Slots[1].LeaseID != got[1].LeaseID || s.Slots[0].Semaphore != "jobs/pool" {
		t.Fatalf("status --json of the semaphore: %v", s)
	}
	if r := n.lhOK("status", "jobs/pool"); !strings.Contains(r.stdout, "jobs/pool: semaphore, 2 of 2 slots held") {
		t.Fatalf("status of the semaphore: %q", r.stdout)
	}
	n.lhOK("release", "--lease", strconv.FormatUint(got[0].LeaseID, 10), "--secret", got[0].Secret)
	r := n.lh("run", "--limit", "2", "jobs/pool", "--", "sh", "-c", "echo $LEASEHOLD_RESOURCE")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "jobs/pool#1" {
		t.Fatalf("run --limit: want the child to see the freed slot jobs/pool#1: %s", r)
	}
}
