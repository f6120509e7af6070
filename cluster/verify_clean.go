package cluster

import (
	"encoding/binary"
	"fmt"

	"github.com/hashicorp/raft-wal/metadb"
)

// cleanStopKey, in the log's metadata store beside raft's term and vote,
// holds the log's last index when the node last stopped cleanly. A crash
// can leave the last write of the log unfinished, and the check takes an
// unfinished last write for the end of the log; after a clean stop no
// write is unfinished, so a log that ends before the recorded index has
// lost acknowledged entries. The node clears the key when it opens the
// log, before raft writes to it.
var cleanStopKey = []byte("LeaseholdCleanStop")

func readCleanStop(meta *metadb.BoltMetaDB) (uint64, error) {
	b, err := meta.GetStable(cleanStopKey)
	if err != nil {
		return 0, fmt.Errorf("cluster: read the log's metadata: %w", err)
	}
	if len(b) != 8 {
		return 0, nil
	}
	return binary.LittleEndian.Uint64(b), nil
}

// markCleanStop records last as the log's last index at a clean stop.
func markCleanStop(meta *metadb.BoltMetaDB, last uint64) error {
	if err := meta.SetStable(cleanStopKey, binary.LittleEndian.AppendUint64(nil, last)); err != nil {
		return fmt.Errorf("cluster: record a clean stop: %w", err)
	}
	return nil
}

func clearCleanStop(meta *metadb.BoltMetaDB) error {
	if err := meta.SetStable(cleanStopKey, nil); err != nil {
		return fmt.Errorf("cluster: clear the clean stop mark: %w", err)
	}
	return nil
}

// markCleanStop records the log's last index once raft has stopped
// cleanly, unless a write to the store failed.
func (n *Node) markCleanStop() error {
	if n.wal == nil || n.fault.get() != nil {
		return nil
	}
	last, err := n.wal.LastIndex()
	if err != nil {
		return fmt.Errorf("cluster: read the log's last index: %w", err)
	}
	return markCleanStop(n.meta, last)
}
