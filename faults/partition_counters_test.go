package faults

import (
	"testing"
	"time"
)

// The partition checkers must be able to fail: each is fed a history
// with known violations.

func TestPartitionCheckersSeeOverlapsAndTokenOrder(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, tc := range []struct {
		name             string
		holds            []hold
		exclusion, order int
	}{
		{"one after another", []hold{
			{resource: "a", leaseID: 1, token: 5, start: at(0), end: at(100)},
			{resource: "a", leaseID: 2, token: 9, start: at(150), end: at(200)},
			{resource: "b", leaseID: 3, token: 7, start: at(50), end: at(180)}, // another resource
		}, 0, 0},
		{"overlap", []hold{
			{resource: "a", leaseID: 1, token: 5, start: at(0), end: at(100)},
			{resource: "a", leaseID: 2, token: 9, start: at(99), end: at(200)},
		}, 1, 0},
		{"the same token for the next holder", []hold{
			{resource: "a", leaseID: 1, token: 5, start: at(0), end: at(100)},
			{resource: "a", leaseID: 2, token: 5, start: at(150), end: at(200)},
		}, 0, 1},
		{"a lower token later", []hold{
			{resource: "a", leaseID: 2, token: 9, start: at(150), end: at(200)},
			{resource: "a", leaseID: 1, token: 5, start: at(300), end: at(400)},
		}, 0, 1},
		{"one lease recorded twice is no overlap", []hold{
			{resource: "a", leaseID: 1, token: 5, start: at(0), end: at(100)},
			{resource: "a", leaseID: 1, token: 5, start: at(50), end: at(100)},
		}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n partitionCounts
			checkExclusion(tc.holds, &n)
			if n.exclusion != tc.exclusion || n.order != tc.order {
				t.Errorf("exclusion %d, order %d; want %d, %d (%v)", n.exclusion, n.order, tc.exclusion, tc.order, n.examples)
			}
		})
	}
}

func TestPartitionCheckersSeeTheCutOffSideAnswered(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	const ttl = 3 * time.Second
	w := []cutOff{{hosts: []string{"n1"}, from: at(1000), to: at(6000)}}
	calls := []call{
		{host: "n1", sent: at(900), returned: at(1100), ok: true},  // sent before the cut
		{host: "n1", sent: at(2000), returned: at(6500), ok: true}, // answered after the heal
		{host: "n2", sent: at(2000), returned: at(2100), ok: true}, // the majority
		{host: "n1", sent: at(2000), returned: at(3000)},           // failed
		{host: "n1", sent: at(2000), returned: at(2050), ok: true}, // wrong
	}
	holds := []hold{
		{host: "n1", lost: true, start: at(0), end: at(3500), doneAt: at(3550)},    // within the bound
		{host: "n1", lost: true, start: at(0), end: at(4500), doneAt: at(4550)},    // past it
		{host: "n1", start: at(0), end: at(900)},                                   // released before the cut
		{host: "n2", lost: true, start: at(0), end: at(5500), doneAt: at(5500)},    // the majority side
		{host: "n1", lost: true, start: at(2000), end: at(5000), doneAt: at(5000)}, // granted during the cut: isolatedOK's
	}
	var n partitionCounts
	checkCutOff(holds, calls, w, ttl, &n)
	if n.isolatedOK != 1 || len(n.failClosed) != 2 || n.lateFailClose != 1 {
		t.Errorf("isolatedOK %d, failClosed %v, lateFailClose %d; want 1, 2 leases, 1\n%v", n.isolatedOK, n.failClosed, n.lateFailClose, n.examples)
	}
}

func TestPartitionCheckersSeeLateCallsAndLeases(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	calls := []call{
		{sent: at(0), returned: at(1000), bound: time.Second}, // on time
		{sent: at(0), returned: at(2000), bound: time.Second}, // late
	}
	holds := []hold{
		{lost: true, end: at(1000), doneAt: at(1010)}, // at its deadline
		{lost: true, end: at(1000), doneAt: at(1600)}, // long after it
		{end: at(1000), doneAt: at(5000)},             // released: not a lapse
	}
	var n partitionCounts
	checkCalls(holds, calls, &n)
	if n.lateCalls != 1 || n.lateFailClose != 1 {
		t.Errorf("lateCalls %d, lateFailClose %d; want 1, 1\n%v", n.lateCalls, n.lateFailClose, n.examples)
	}
}

// After a leader change tokens run ahead of the log's indexes (the token
// floor), so only the send time shows that a write came after a newer
// grant.
func TestPartitionCheckersSeeStaleWritesBySendTime(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	holds := []hold{
		{resource: "a", leaseID: 1, token: 5, start: at(0), end: at(900)},
		{resource: "a", leaseID: 2, token: 1030, start: at(1000), end: at(2000)},
	}
	calls := []call{
		{resource: "a", token: 5, sent: at(500), ok: true},     // while it held: fine
		{resource: "a", token: 5, sent: at(1500), ok: true},    // after token 1030's grant: stale
		{resource: "a", token: 5, sent: at(1600)},              // refused: fine
		{resource: "a", token: 1030, sent: at(1500), ok: true}, // the holder: fine
		{sent: at(1500), ok: true},                             // not fenced
	}
	var n partitionCounts
	checkStale(holds, calls, &n)
	if n.stale != 1 {
		t.Errorf("stale %d, want 1\n%v", n.stale, n.examples)
	}
}
