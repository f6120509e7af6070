package cluster

import (
	"crypto/sha256"
	"fmt"
	"github.com/leasehold/leasehold/fsm"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
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

// BenchmarkRestart100k: a node holding 100,000 leases is closed and opened
// again; the time is until it commits a new proposal (replaying its log,
// or restoring its snapshot and the log after it).
func BenchmarkRestart100k(b *testing.B) {
	for _, snapshot := range []bool{false, true} {
		b.Run(fmt.Sprintf("snapshot=%v", snapshot), func(b *testing.B) {
			cfg := testConfig(b, b.TempDir())
			cfg.SnapshotThreshold = 1 << 30 // only the snapshot taken below
			n := openNode(b, cfg)
			ctx := b.Context()
			const leases = 100_000
			holdLeases(b, n, leases)
			if snapshot {
				if err := n.Snapshot(); err != nil {
					b.Fatal(err)
				}
			}
			if err := n.Close(); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				start := time.Now()
				n = openNode(b, cfg)
				if _, err := n.Propose(ctx, acquireCmd(fmt.Sprint("probe", start.UnixNano()), time.Hour, 0, "probe")); err != nil {
					b.Fatal(err)
				}
				took := time.Since(start)
				if got := n.Stats().Counts.Leases; got < leases {
					b.Fatalf("%d leases after the restart, want %d", got, leases)
				}
				b.ReportMetric(took.Seconds(), "s/restart")
				b.StopTimer()
				if err := n.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkNodeMemory reports the heap a node holds per lease with
// 100,000 leases held (the state machine, its leader timers and raft).
func BenchmarkNodeMemory(b *testing.B) {
	for b.Loop() {
		heap := func() uint64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		base := heap()
		n := openNode(b, testConfig(b, b.TempDir()))
		const leases = 100_000
		holdLeases(b, n, leases)
		b.ReportMetric(float64(heap()-base)/leases, "B/lease")
		n.Close()
	}
}

// holdLeases has n grant count one-hour leases, 256 to a log entry, each
// acquired with a request ID as clients send them.
func holdLeases(b testing.TB, n *Node, count int) {
	b.Helper()
	const chunk = 256
	for i := 0; i < count; i += chunk {
		cmds := make([]fsm.Command, min(chunk, count-i))
		for k := range cmds {
			id := fmt.Sprintf("%032x", i+k)
			cmds[k] = acquireCmd(id, time.Hour, 0, "res/"+id[24:])
		}
		if _, err := n.ProposeAll(b.Context(), cmds); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFsyncFloor: write 4 KiB and sync it, one writer, in the test's
// temp dir (the same disk the nodes' logs use): the floor under every
// commit, since each log entry is one such write. The file is grown by
// each write ("append"), preallocated with fallocate as raft-wal makes its
// segments ("fallocated": the space is reserved but unwritten, so each
// write also changes the file's extent map), or written with zeros ahead
// ("zeroed": only the data changes). Each is synced with fsync, as raft-wal
// does, and with fdatasync.
//
//	go test -run XXX -bench FsyncFloor -benchtime 2s ./cluster
func BenchmarkFsyncFloor(b *testing.B) {
	const size = 64 << 20
	for _, layout := range []string{"append", "fallocated", "zeroed"} {
		for _, how := range []string{"fsync", "fdatasync"} {
			b.Run(layout+"/"+how, func(b *testing.B) {
				f, err := os.Create(filepath.Join(b.TempDir(), "floor"))
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				switch layout {
				case "fallocated":
					err = syscall.Fallocate(int(f.Fd()), 0, 0, size)
				case "zeroed":
					_, err = f.Write(make([]byte, size))
				}
				if err == nil {
					err = f.Sync()
				}
				if err != nil {
					b.Fatal(err)
				}
				sync := f.Sync
				if how == "fdatasync" {
					sync = func() error { return syscall.Fdatasync(int(f.Fd())) }
				}
				buf := make([]byte, 4<<10)
				var off int64
				for b.Loop() {
					if _, err := f.WriteAt(buf, off); err != nil {
						b.Fatal(err)
					}
					if err := sync(); err != nil {
						b.Fatal(err)
					}
					off = (off + int64(len(buf))) % size
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "syncs/s")
			})
		}
	}
}
