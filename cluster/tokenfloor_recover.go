package cluster

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/leasehold/leasehold/fsm"
)

// replayLastToken rebuilds the state the data dir still holds (the newest
// intact snapshot and the entries kept after it) and returns its token
// counter: above every token those entries issued. For a token floor that
// must be worked out again.
func replayLastToken(c *dirCheck) (uint64, error) {
	st := fsm.New(fsm.DefaultConfig(), nil)
	if snap, ok := c.newestSnapshot(); ok {
		path := filepath.Join(snap.dir, "state.bin")
		data, err := os.ReadFile(path)
		if err == nil {
			st, err = fsm.Restore(data, fsm.DefaultConfig(), nil)
		}
		if err != nil {
			return 0, fmt.Errorf("cluster: read snapshot %s for its tokens: %w", path, err)
		}
	}
	var after []logEntry
	for i, e := range c.keep {
		if e.index > c.snapshot {
			after = c.keep[i:]
			break
		}
	}
	err := forEachEntry(c.log, after, func(l *raft.Log) error {
		if l.Type != raft.LogCommand {
			return nil
		}
		b, err := fsm.DecodeBatch(l.Data)
		if err != nil {
			return fmt.Errorf("cluster: entry %d: %w", l.Index, err)
		}
		st.Apply(l.Index, b)
		return nil
	})
	return st.LastToken(), err
}
