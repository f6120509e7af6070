package cluster

import (
	"github.com/hashicorp/raft"

	"github.com/leasehold/leasehold/fsm"
)

// A raft snapshot is taken in two steps: Snapshot on the apply goroutine
// (so at one applied index; nothing applies meanwhile) and Persist on
// another, while entries keep being applied. The first step only
// captures the state (fsm.State.Capture: the same cost at any size); the
// second encodes it straight into raft's sink, in slices of about 64 KiB,
// so the encoding (~25 MB at 100,000 leases) is never held whole and
// never holds up Apply.
type snapshot struct{ *fsm.Snapshot }

func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.WriteTo(sink); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}
