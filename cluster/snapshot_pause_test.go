package cluster

import (
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/fsm"
)

// BenchmarkSnapshotApplyPause measures how long a snapshot holds up the
// apply loop of a machine holding many leases. raft takes a snapshot in
// two steps: Snapshot on the apply goroutine (nothing applies meanwhile)
// and Persist on another while entries keep being applied; the snapshot
// is released once persisted, and the state folds back what was written
// around it (fsm's cowMap). So the bench calls Snapshot between two
// Applies and then applies renewals, one an entry, until Persist (into a
// file, as raft's file store does) is done and the snapshot released, and
// as many again after. It reports the Snapshot call (capture-ms), the
// longest Apply while Persist ran (apply-ms), the longest after the
// release (release-ms), and the largest of the three, the apply pause
// (pause-ms). The million-lease case takes about a minute and 2 GB:
//
//	go test -run XXX -bench SnapshotApplyPause -benchtime 3x ./cluster
func BenchmarkSnapshotApplyPause(b *testing.B) {
	for _, count := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("leases=%d", count), func(b *testing.B) {
			m, ids := machineHolding(b, count)
			ix := m.state.LastIndex()
			i := 0
			renew := func() time.Duration {
				start := time.Now()
				ix++
				id := ids[i%len(ids)]
				i++
				data := (&fsm.Batch{Time: time.Now().UnixNano(), Cmds: []fsm.Command{
					&fsm.Renew{LeaseID: id, SecretHash: pauseSecret(id)}}}).Encode(nil)
				if res, ok := m.Apply(&raft.Log{Index: ix, Type: raft.LogCommand, Data: data}).([]fsm.Result); !ok || res[0].Err != nil {
					b.Fatalf("renewal of lease %d failed: %v", id, res)
				}
				return time.Since(start)
			}
			var capture, apply, release, pause time.Duration
			for b.Loop() {
				start := time.Now()
				snap, err := m.Snapshot()
				if err != nil {
					b.Fatal(err)
				}
				took := time.Since(start)
				done := make(chan error, 1)
				go func() {
					err := snap.Persist(newFileSink(b, filepath.Join(b.TempDir(), "state.bin")))
					snap.Release()
					done <- err
				}()
				var during, after time.Duration
				n := 0
			persist:
				for ; ; n++ {
					select {
					case err := <-done:
						if err != nil {
							b.Fatal(err)
						}
						break persist
					default:
						during = max(during, renew())
					}
				}
				for range n {
					after = max(after, renew())
				}
				capture, apply, release = max(capture, took), max(apply, during), max(release, after)
				pause = max(pause, took, during, after)
			}
			b.ReportMetric(float64(capture.Microseconds())/1000, "capture-ms")
			b.ReportMetric(float64(apply.Microseconds())/1000, "apply-ms")
			b.ReportMetric(float64(release.Microseconds())/1000, "release-ms")
			b.ReportMetric(float64(pause.Microseconds())/1000, "pause-ms")
		})
	}
}

// machineHolding is a machine (no raft) holding count one-hour leases,
// 256 granted to an entry; it returns their ids.
func machineHolding(b *testing.B, count int) (*machine, []uint64) {
	b.Helper()
	log := slog.New(slog.DiscardHandler)
	m := newMachine(fsm.DefaultConfig(), newTimers(clock.Real{}, log), newWaits(), noEvents{}, nil, log)
	ids := make([]uint64, 0, count)
	const chunk = 256
	for i, ix := 0, uint64(1); i < count; i, ix = i+chunk, ix+1 {
		cmds := make([]fsm.Command, min(chunk, count-i))
		for k := range cmds {
			cmds[k] = &fsm.Acquire{RequestID: fmt.Sprintf("%032x", i+k), Resources: []string{fmt.Sprintf("res/%08d", i+k)},
				TTL: time.Hour, Owner: fmt.Sprint("bench-", (i+k)%100), Operation: "hold"}
		}
		// A lease's id is its token: the entry's index, then one past the
		// last token for each later grant in the same entry.
		first := max(ix, uint64(len(ids))+1)
		for k := range cmds {
			cmds[k].(*fsm.Acquire).SecretHash = pauseSecret(first + uint64(k))
		}
		data := (&fsm.Batch{Time: time.Now().UnixNano(), Cmds: cmds}).Encode(nil)
		res, ok := m.Apply(&raft.Log{Index: ix, Type: raft.LogCommand, Data: data}).([]fsm.Result)
		if !ok {
			b.Fatal("the fill was not applied")
		}
		for k, r := range res {
			if r.Err != nil || r.Lease.ID != first+uint64(k) {
				b.Fatalf("grant %d: %v, lease %v", k, r.Err, r.Lease)
			}
			ids = append(ids, r.Lease.ID)
		}
	}
	return m, ids
}

func pauseSecret(id uint64) [32]byte { return sha256.Sum256(fmt.Append(nil, id)) }

// fileSink is raft's SnapshotSink over a plain file.
type fileSink struct{ *os.File }

func newFileSink(b *testing.B, path string) *fileSink {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	return &fileSink{f}
}

func (s *fileSink) ID() string    { return s.Name() }
func (s *fileSink) Cancel() error { return s.File.Close() }
func (s *fileSink) Close() error  { return s.File.Close() }
