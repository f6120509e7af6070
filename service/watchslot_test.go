package service_test

import (
	"runtime"
	"testing"

	"github.com/leasehold/leasehold/fsm"
	"github.com/leasehold/leasehold/service"
)

// The ring keeps a lease event in 96 bytes (an fsm.Event takes 152): a
// full ring of 100,000 renewals grows the heap by at most 100 bytes an
// event, and a watcher that asks for renewals gets them whole.
func TestRingKeepsLeaseEventsCompactly(t *testing.T) {
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	const n = 100_000
	res := []string{"jobs/1"}
	before := heap()
	hub := service.NewHub(service.HubConfig{Events: n})
	for i := range uint64(n) {
		hub.Event(fsm.Event{Index: i + 1, Kind: fsm.EventRenewed, LeaseID: 7, Token: 7, Resources: res, Owner: "o", Operation: "op"})
		hub.Applied(i + 1)
	}
	per := float64(heap()-before) / n
	t.Logf("%.0f bytes an event", per)
	if per > 100 {
		t.Fatalf("the ring takes %.0f bytes a lease event, want at most 100", per)
	}
	w, err := hub.Watch(t.Context(), service.WatchRequest{From: n - 1, Renewed: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	b := <-w.Batches()
	want := service.Event{Index: n, Kind: fsm.EventRenewed.String(), LeaseID: 7, Token: 7, Resources: res, Owner: "o", Operation: "op"}
	if len(b.Events) != 1 || b.Events[0].Index != want.Index || b.Events[0].Kind != want.Kind || b.Events[0].LeaseID != 7 ||
		b.Events[0].Token != 7 || len(b.Events[0].Resources) != 1 || b.Events[0].Owner != "o" || b.Events[0].Operation != "op" {
		t.Fatalf("the last renewal reads %+v, want %+v", b.Events, want)
	}
	runtime.KeepAlive(hub)
}
