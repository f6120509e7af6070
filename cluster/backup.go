package cluster

import (
	"fmt"

	"github.com/leasehold/leasehold/fsm"
)

// Backup is a replica's whole state for `leasehold snapshot save`: encoded
// as in a raft snapshot, as of the log index it reflects.
type Backup struct {
	Index     uint64 // the last log index applied
	Term      uint64 // the raft term when it was taken
	LastToken uint64 // the largest fencing token in it
	State     []byte // fsm.State.Snapshot()
}

// Backup encodes this replica's state at one applied index. The state is
// read-locked while it is encoded (as for a raft snapshot), so the bytes
// reflect exactly the entries up to Index; they are made once, and the
// caller streams them from there.
func (n *Node) Backup() Backup {
	var b Backup
	n.m.read(func(s *fsm.State) {
		b.Index, b.LastToken, b.State = s.LastIndex(), s.LastToken(), s.Snapshot()
	})
	fmt.Sscan(n.raft.Stats()["term"], &b.Term)
	return b
}
