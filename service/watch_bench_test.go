package service_test

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/fsm"
	"github.com/leasehold/leasehold/service"
)

// BenchmarkHubFanout100 feeds the hub one event per entry with 100
// watchers reading everything, pausing every 10,000 events until they are
// nearly caught up: ns/op is the cost of one applied event delivered to
// all 100 (the hub alone, without raft or HTTP).
//
//	go test -run '^$' -bench HubFanout -benchtime 200000x ./service/
func BenchmarkHubFanout100(b *testing.B) {
	hub := service.NewHub(service.HubConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for range 100 {
		w, err := hub.Watch(ctx, service.WatchRequest{Now: true})
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for batch := range w.Batches() {
				if n += len(batch.Events); n >= b.N {
					return
				}
			}
		}()
	}
	b.ResetTimer()
	for i := range uint64(b.N) {
		hub.Event(fsm.Event{Index: i + 1, Kind: fsm.EventPut, Key: "k/1", Value: []byte("v"), Version: i + 1})
		hub.Applied(i + 1)
		if i%10_000 == 9_999 {
			// Raft applies far slower than this loop: let the watchers
			// catch up rather than be cut off for lagging.
			for hub.Stats().MaxLag > 1_000 {
				runtime.Gosched()
			}
		}
	}
	wg.Wait()
	if c := hub.Stats().CutOff; c != 0 {
		b.Fatalf("%d watchers were cut off: the figure would count undelivered events", c)
	}
	b.ReportMetric(float64(b.N)*100/b.Elapsed().Seconds(), "deliveries/s")
}
