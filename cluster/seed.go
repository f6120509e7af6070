package cluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"

	"github.com/leasehold/leasehold/fsm"
)

// RestoreTokenBump is how far above the largest token in a backup a
// restore puts the token floor by default: tokens the old cluster granted
// after the backup was taken are in no backup, yet their holders may still
// present them, so the new cluster must start well above. (Give a larger
// bump if the old cluster granted more than this since the backup.)
const RestoreTokenBump = 1 << 20

// Seed is what a restore puts into a new data dir.
type Seed struct {
	NodeID    string // the new node's id
	Advertise string // its raft address as other nodes dial it
	Index     uint64 // the log index the state reflects
	Term      uint64 // the raft term it was taken in
	State     []byte // the encoded state (fsm.State.Snapshot)
	// TokenFloor is the least token issued after the restore; it must be
	// above every token in State.
	TokenFloor uint64
}

// SeedDataDir makes dir, which must be absent or empty, the data dir of a
// new cluster of one voter, seed.NodeID, whose state is seed.State: a raft
// snapshot at seed.Index naming only the new node (it is no member of the
// cluster the state came from), the raft term, and the token floor. The
// node started on it continues from the state; more nodes join it as they
// join any cluster. The state is checked before anything is written.
func SeedDataDir(dir string, seed Seed) error {
	st, err := fsm.Restore(seed.State, fsm.DefaultConfig(), nil)
	if err != nil {
		return fmt.Errorf("cluster: the backup's state cannot be read: %w; nothing was written", err)
	}
	switch {
	case seed.NodeID == "" || seed.Advertise == "":
		return errors.New("cluster: a restore needs the new node's id and raft address")
	case seed.Index == 0 || st.LastIndex() != seed.Index:
		return fmt.Errorf("cluster: the backup's header says index %d but its state is at index %d; nothing was written", seed.Index, st.LastIndex())
	case seed.TokenFloor <= st.LastToken() || seed.TokenFloor > fsm.MaxTokenFloor:
		return fmt.Errorf("cluster: token floor %d is not above the backup's largest token %d", seed.TokenFloor, st.LastToken())
	}
	if err := requireEmptyDir(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cluster: create data dir: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := seedSnapshot(dir, seed); err != nil {
		return err
	}
	if err := seedTerm(filepath.Join(dir, "wal"), seed.Term); err != nil {
		return err
	}
	f := &tokenFloor{dir: dir}
	if err := f.store(seed.TokenFloor); err != nil {
		return err
	}
	return syncDir(dir)
}

// requireEmptyDir refuses a data dir that holds anything: a restore seeds
// a new node, and must never mix with (or overwrite) another's state.
func requireEmptyDir(dir string) error {
	d, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cluster: open data dir: %w", err)
	}
	defer d.Close()
	if _, err := d.Readdirnames(1); !errors.Is(err, io.EOF) {
		if err == nil {
			return fmt.Errorf("cluster: data dir %s is not empty: a restore seeds a new node only; give a new or empty directory", dir)
		}
		return fmt.Errorf("cluster: read data dir: %w", err)
	}
	return nil
}

// seedSnapshot writes the state as raft's snapshot at seed.Index, with a
// configuration of the new node alone.
func seedSnapshot(dir string, seed Seed) error {
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclog.NewNullLogger())
	if err != nil {
		return fmt.Errorf("cluster: open snapshots: %w", err)
	}
	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(seed.NodeID), Address: raft.ServerAddress(seed.Advertise)}}}
	// Create encodes the peers' addresses through a transport; the
	// network transport's encoding is the address itself, as the in-memory
	// one's is, so no listener is opened.
	_, trans := raft.NewInmemTransport(raft.ServerAddress(seed.Advertise))
	defer trans.Close()
	sink, err := snaps.Create(1, seed.Index, seed.Term, conf, seed.Index, trans)
	if err != nil {
		return fmt.Errorf("cluster: create snapshot: %w", err)
	}
	if _, err := sink.Write(seed.State); err != nil {
		sink.Cancel()
		return fmt.Errorf("cluster: write snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("cluster: write snapshot: %w", err)
	}
	return nil
}

// seedTerm saves the raft term, so the new node's first election is of a
// later term than the entries the state reflects.
func seedTerm(walDir string, term uint64) error {
	if err := os.MkdirAll(walDir, 0o700); err != nil {
		return fmt.Errorf("cluster: create log dir: %w", err)
	}
	meta := &metadb.BoltMetaDB{}
	defer meta.Close()
	w, err := raftwal.Open(walDir, raftwal.WithLogger(hclog.NewNullLogger()), raftwal.WithMetaStore(meta))
	if err != nil {
		return fmt.Errorf("cluster: create log: %w", err)
	}
	defer w.Close()
	if err := w.SetUint64([]byte("CurrentTerm"), term); err != nil { // raft's key for its term
		return fmt.Errorf("cluster: save term: %w", err)
	}
	return nil
}
