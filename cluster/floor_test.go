package cluster

import (
	"crypto/sha256"
	"fmt"
	"github.com/leasehold/leasehold/fsm"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

// noopFSM applies nothing: BenchmarkRaftFloor measures raft and the
// fsync'd log alone, the floor under every leasehold figure.
type noopFSM struct{}

func (noopFSM) Apply(*raft.Log) any                 { return nil }
func (noopFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, fmt.Errorf("no snapshots") }
func (noopFSM) Restore(io.ReadCloser) error         { return nil }

// BenchmarkRaftFloor: one in-process voter on raft-wal, no-op state
// machine, N callers each applying one 64-byte entry at a time. The
// applies/s it reports is the most a server that proposes one entry per
// request could do on this machine.
func BenchmarkRaftFloor(b *testing.B) {
	for _, callers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			dir := b.TempDir()
			meta := &metadb.BoltMetaDB{}
			w, err := raftwal.Open(dir, raftwal.WithMetaStore(meta))
			if err != nil {
				b.Fatal(err)
			}
			defer meta.Close()
			defer w.Close()
			rc := raft.DefaultConfig()
			rc.LocalID = "a"
			rc.LogLevel = "error"
			rc.BatchApplyCh = true
			addr, trans := raft.NewInmemTransport("a")
			r, err := raft.NewRaft(rc, noopFSM{}, w, w, raft.NewInmemSnapshotStore(), trans)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Shutdown()
			r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: "a", Address: addr}}})
			deadline := time.Now().Add(10 * time.Second)
			for r.State() != raft.Leader {
				if time.Now().After(deadline) {
					b.Fatal("no leader")
				}
				time.Sleep(10 * time.Millisecond)
			}
			entry := make([]byte, 64)
			var wg sync.WaitGroup
			per := b.N/callers + 1
			b.ResetTimer()
			start := time.Now()
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range per {
						if err := r.Apply(entry, 0).Error(); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(per*callers)/time.Since(start).Seconds(), "applies/s")
		})
	}
}

// BenchmarkProposePair: acquire+release through Node.Propose, one caller,
// no API in front: what a pair costs in the node itself.
func BenchmarkProposePair(b *testing.B) {
	n := openNode(b, testConfig(b, b.TempDir()))
	defer n.Close()
	ctx := b.Context()
	start := time.Now()
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("p%d", i)
		res, err := n.Propose(ctx, acquireCmd(id, time.Minute, 0, fmt.Sprintf("r%d", i%1024)))
		if err != nil || res.Err != nil {
			b.Fatal(err, res.Err)
		}
		rel := &fsm.Release{RequestID: id + "r", LeaseID: res.Lease.ID, SecretHash: sha256.Sum256([]byte(id))}
		if res, err := n.Propose(ctx, rel); err != nil || res.Err != nil {
			b.Fatal(err, res.Err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pairs/s")
}
