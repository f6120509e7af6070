package server_test

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/internal/testcluster"
)

// BenchmarkSnapshotSave streams a backup of a node holding 5000 leases and
// 5000 keys (Admin/Snapshot through client.Snapshot, into io.Discard).
//
//	go test -run XXX -bench SnapshotSave -benchtime 20x ./server
func BenchmarkSnapshotSave(b *testing.B) {
	n := startNode(b)
	c, err := client.New(client.Config{Endpoints: []string{n.URL}, Logger: testcluster.Logger()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	const items, workers = 5000, 32
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < items; i += workers {
				if _, err := c.Acquire(ctx, fmt.Sprintf("bench/%d", i), client.TTL(time.Hour), client.ManualRenew()); err != nil {
					b.Error(err)
					return
				}
				if _, err := c.Put(ctx, fmt.Sprintf("kv/%d", i), []byte("value")); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ResetTimer()
	var size int64
	for b.Loop() {
		info, err := c.Snapshot(ctx, func(client.SnapshotInfo) (io.Writer, error) { return io.Discard, nil })
		if err != nil {
			b.Fatal(err)
		}
		size = info.Size
	}
	b.ReportMetric(float64(size), "state-bytes")
	b.ReportMetric(float64(size)/(2*items), "bytes/item")
}
