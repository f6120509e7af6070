package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"

	"github.com/leasehold/leasehold/fsm"
)

// BenchmarkVerifyLog100k: the open-time check of a log of 100,000 entries
// of one acquire each (every checksum, every entry decoded). MiB is how
// much of the log was written; the segment file is preallocated to 64 MiB.
func BenchmarkVerifyLog100k(b *testing.B) {
	walDir := b.TempDir()
	meta := &metadb.BoltMetaDB{}
	w, err := raftwal.Open(walDir, raftwal.WithMetaStore(meta))
	if err != nil {
		b.Fatal(err)
	}
	const entries = 100_000
	var batch []*raft.Log
	for i := uint64(1); i <= entries; i++ {
		cmd := acquireCmd(fmt.Sprint("req-", i), time.Minute, 0, fmt.Sprint("jobs/", i))
		data := (&fsm.Batch{Time: time.Now().UnixNano(), Cmds: []fsm.Command{cmd}}).Encode(nil)
		batch = append(batch, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: data})
		if len(batch) == 64 || i == entries {
			if err := w.StoreLogs(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	w.Close()
	var size int64
	for b.Loop() {
		ls, err := scanLog(walDir, meta)
		if err != nil || ls.damage != nil || ls.last() != entries {
			b.Fatalf("verify: %v %v, intact up to %d", err, ls.damage, ls.last())
		}
		size = 0
		for _, s := range ls.segs {
			size += s.end
		}
	}
	meta.Close()
	b.ReportMetric(float64(size)/(1<<20), "MiB")
}

// A crash between creating the log's newest segment and preallocating it
// leaves a short, empty file: that is not damage (raft-wal starts it
// over), while a short file that held a write is.
func TestShortEmptyTailIsNotDamage(t *testing.T) {
	cfg, _ := damagedNode(t, 1<<20, false)
	segs := segments(t, cfg.DataDir)
	tail := segs[len(segs)-1]
	sc := scanSegment(filepath.Join(cfg.DataDir, "wal"), tail)
	if sc.damage != nil || len(sc.writes) == 0 {
		t.Fatalf("intact tail: %v, %d writes", sc.damage, len(sc.writes))
	}
	if err := os.Truncate(segPath(cfg.DataDir, tail), 0); err != nil {
		t.Fatal(err)
	}
	if sc := scanSegment(filepath.Join(cfg.DataDir, "wal"), tail); sc.damage != nil && !sc.torn {
		t.Fatalf("an empty short tail is reported as damage: %v", sc.damage)
	}
}
