package cluster

import (
	"fmt"
	"io"
	"os"

	"github.com/hashicorp/raft"
	"github.com/leasehold/leasehold/fsm"
)

// A raft snapshot is taken in two steps: Snapshot on the apply goroutine
// (so at one applied index) and Persist on another, while entries keep
// being applied. The state is therefore encoded in the first step, and
// spooled to an unlinked temporary file in the data directory rather
// than held in memory: 100,000 leases encode to ~25 MB, which raised the
// node's heap by half at every snapshot (every 30 s under load) and so
// set its resident size. Persist copies the file into raft's sink.
type spool struct{ f *os.File }

func spoolSnapshot(s *fsm.State, dir string) (*spool, error) {
	f, err := os.CreateTemp(dir, ".fsm-snapshot-*")
	if err != nil {
		return nil, fmt.Errorf("cluster: spool a snapshot: %w", err)
	}
	sp := &spool{f: f}
	// Unlinked at once where the system allows it (the open file keeps
	// its bytes), so a crash leaves nothing behind; elsewhere Release
	// removes it.
	os.Remove(f.Name())
	if err := s.WriteSnapshot(f); err != nil {
		sp.Release()
		return nil, fmt.Errorf("cluster: spool a snapshot: %w", err)
	}
	return sp, nil
}

func (sp *spool) Persist(sink raft.SnapshotSink) error {
	if _, err := sp.f.Seek(0, io.SeekStart); err != nil {
		sink.Cancel()
		return err
	}
	if _, err := io.Copy(sink, sp.f); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (sp *spool) Release() {
	sp.f.Close()
	os.Remove(sp.f.Name()) // already gone where it was unlinked at once
}
