package fsm

import (
	"fmt"
	"runtime"
	"testing"
)

// A held lease remembers its last renewal for retries without keeping
// the renewal's key: renewing every lease leaves the heap as it was (a
// key string per lease took about 64 bytes), and a retry of the last
// renewal is still answered from memory, also after a snapshot.
func TestRenewalRemembersNoKeyString(t *testing.T) {
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	h := newHarness(t)
	h.s = New(DefaultConfig(), nil) // no recorder: it keeps every event
	const n = 20_000
	cmds := make([]Command, n)
	for i := range cmds {
		cmds[i] = acq(fmt.Sprintf("a%d", i), fmt.Sprintf("res/%d", i))
	}
	rs := h.apply(cmds...)
	renewals := make([]Command, n)
	for i, r := range rs {
		c := renew(r.Lease, fmt.Sprintf("a%d", i))
		c.RequestID = fmt.Sprintf("renew-%d-%024d", i, i)
		renewals[i] = c
	}
	before := heap()
	h.apply(renewals...)
	per := (float64(heap()) - float64(before)) / n
	runtime.KeepAlive(renewals)
	t.Logf("%.1f bytes kept per renewed lease", per)
	if per > 16 {
		t.Fatalf("renewing each lease once kept %.1f bytes per lease, want at most 16", per)
	}

	retry := *renewals[7].(*Renew)
	if r := h.one(&retry); r.Err != nil || !r.Dup || r.Lease.RenewCount != 1 {
		t.Fatalf("retry of the last renewal: %s (%v), want the first answer", summarize(r), r.Err)
	}
	s, err := Restore(h.s.Snapshot(), DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	if r := h.one(&retry); r.Err != nil || !r.Dup || r.Lease.RenewCount != 1 {
		t.Fatalf("retry of the last renewal after a snapshot: %s (%v), want the first answer", summarize(r), r.Err)
	}
	if got := readRenewDigest(string([]byte{0, 1, 'c'}) + "0123456789abcdef" + "id"); got != digestRenewKey("\x00\x01c0123456789abcdefid") {
		t.Fatal("a full key from an older snapshot is not read as its digest")
	}
}
