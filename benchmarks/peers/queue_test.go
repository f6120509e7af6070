package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestKeyOrderCountsOnlyDeliveriesOutOfOrder: the next number of a key,
// or the same again (a redelivery), is in order; a gap or a step back is
// a violation.
func TestKeyOrderCountsOnlyDeliveriesOutOfOrder(t *testing.T) {
	k := &keyOrder{last: make([]atomic.Uint64, 2)}
	for _, s := range []uint64{1, 2, 2, 3} {
		k.saw(0, s)
	}
	if v, r := k.violations.Load(), k.redelivered.Load(); v != 0 || r != 1 {
		t.Fatalf("in order with one redelivery: %d violations, %d redelivered; want 0, 1", v, r)
	}
	k.saw(1, 2) // key 1's 2 before its 1
	k.saw(1, 1) // and a step back
	if v := k.violations.Load(); v != 2 {
		t.Fatalf("a gap and a step back: %d violations, want 2", v)
	}
}

func TestMessageRoundTrip(t *testing.T) {
	b := make([]byte, queueBody)
	before := time.Now()
	encodeMsg(b, 1023, 77)
	sent, k, s, ok := decodeMsg(b)
	if !ok || k != 1023 || s != 77 || sent.Before(before.Add(-time.Second)) || sent.After(time.Now()) {
		t.Fatalf("decoded %v %d %d %v", sent, k, s, ok)
	}
	if _, _, _, ok := decodeMsg(b[:10]); ok {
		t.Fatal("a short body decoded")
	}
}

// TestMallocsOfReadsTheGoCollector: allocations are read from a node's
// go_memstats_mallocs_total, and a node without it reads as -1.
func TestMallocsOfReadsTheGoCollector(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			w.Write([]byte("# HELP go_memstats_mallocs_total x\ngo_memstats_mallocs_total 1.234567e+06\n"))
		}
	}))
	defer srv.Close()
	if n := mallocsOf(srv.URL + "/metrics"); n != 1234567 {
		t.Fatalf("read %d, want 1234567", n)
	}
	if n := nodeMallocs([]string{srv.URL, srv.URL}); n != 2469134 {
		t.Fatalf("two nodes read %d, want 2469134", n)
	}
	if n := mallocsOf(srv.URL + "/nothing"); n != -1 {
		t.Fatalf("no counter read %d, want -1", n)
	}
}

func TestPrimitiveTablesSetEachTargetAgainstPostgres(t *testing.T) {
	rs := []result{
		{scenario: scenario{Primitive: primQueue, Nodes: 1, Resources: 1024, Workers: 16}, Target: targetQOwn, PairsPerS: 3000, NodeAllocs: 100, ClientAllocs: 40},
		{scenario: scenario{Primitive: primQueue, Nodes: 1, Resources: 1024, Workers: 16}, Target: targetQPostgres, PairsPerS: 1000, NodeAllocs: -1, ClientAllocs: 30, OrderViolations: 0},
		{scenario: scenario{Primitive: primIdem, Nodes: 1, Workers: 16}, Target: targetIPostgres, PairsPerS: 500, NodeAllocs: -1},
		{scenario: scenario{Primitive: primIdem, Nodes: 1, Workers: 16}, Target: targetIShared, PairsPerS: 2000, NodeAllocs: 50},
	}
	md := markdown(rs, time.Second, 5*time.Second)
	for _, want := range []string{"| 1 | 16 | postgres, SKIP LOCKED table | 1000 |", "| 1 | 16 | leasehold, client per worker | 3000 (3.0×) |",
		"| 1 | 16 | leasehold, shared client | 2000 (4.0×) |", "– + 30", "100 + 40"} {
		if !strings.Contains(md, want) {
			t.Errorf("the tables lack %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "Locks:") {
		t.Errorf("a lock table without lock rounds:\n%s", md)
	}
	if i, j := strings.Index(md, "postgres, SKIP LOCKED"), strings.Index(md, "leasehold, client per worker"); i > j {
		t.Errorf("Postgres, the base, is not first:\n%s", md)
	}
}
