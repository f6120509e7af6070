package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/leasehold/leasehold/fsm"
)

// TokenFloorFile, in the data dir, holds a number above every fencing token
// this node has applied. It lives apart from the log so that a disk losing
// the log's end cannot lower it; a new leader raises the state's token
// counter to it (fsm.RaiseTokens) before it serves, so no token is issued
// twice even after acknowledged entries were lost.
const TokenFloorFile = "token-floor"

// tokenFloorStep is how far ahead of the applied tokens the floor is moved:
// one fsync'd write per that many tokens, and after a crash the tokens jump
// by at most that much (one and a half steps just after a save ahead).
const tokenFloorStep = 1024

// The floor is saved ahead, in the background, once the tokens are within
// half a step of it: a save is a file write, a rename and two fsyncs
// (1-20 ms here), and made inside Apply it held up every answer of that
// entry, a hand-off to every waiter in line behind it included. Apply
// waits for a save only when the tokens catch up with the floor first.
type tokenFloor struct {
	dir    string
	mu     sync.Mutex
	next   uint64 // every token this node applied is below it (the floor saved last)
	saving bool   // a save ahead is under way
	ahead  sync.WaitGroup
	write  sync.Mutex // one save at a time, so the file only ever rises (settle aside)
	// waited counts the covers that had to wait for a save.
	waited int
}

// openTokenFloor reads the floor of the data dir (0 if it has none yet).
func openTokenFloor(dir string) (*tokenFloor, error) {
	v, err := ReadTokenFloor(dir)
	if err != nil {
		return nil, err
	}
	return &tokenFloor{dir: dir, next: v}, nil
}

// ReadTokenFloor returns the token floor saved in a data dir, 0 if none.
// A file that does not hold a number of tokens is a *DamageError (the
// floor cannot be known: `leasehold recover` saves one again).
func ReadTokenFloor(dir string) (uint64, error) {
	path := filepath.Join(dir, TokenFloorFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("cluster: read token floor: %w", err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err == nil && v > fsm.MaxTokenFloor {
		err = fmt.Errorf("above the largest token %d", uint64(fsm.MaxTokenFloor))
	}
	if err != nil {
		if len(b) > 40 {
			b = b[:40]
		}
		return 0, &DamageError{File: path, Offset: -1, DataDir: dir, Reason: fmt.Sprintf(
			"the token floor file is damaged (%q is not a number of tokens); it must hold a number above every token "+
				"ever issued, and `leasehold recover` saves one again from the log and snapshots", b)}
	}
	return v, nil
}

func (f *tokenFloor) value() uint64 {
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.next
}

// cover makes sure the saved floor is above token before it is answered.
func (f *tokenFloor) cover(token uint64) error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	if token < f.next {
		if !f.saving && f.next-token <= tokenFloorStep/2 {
			f.saving = true
			f.ahead.Add(1)
			go f.saveAhead(f.next + tokenFloorStep)
		}
		f.mu.Unlock()
		return nil
	}
	f.waited++
	f.mu.Unlock()
	return f.store(token + tokenFloorStep)
}

// saveAhead saves v as the floor before the tokens reach the current one.
// A failure is left to the cover that reaches the floor, which saves (or
// reports the failure) itself.
func (f *tokenFloor) saveAhead(v uint64) {
	defer f.ahead.Done()
	f.store(v)
	f.mu.Lock()
	f.saving = false
	f.mu.Unlock()
}

// wait returns when no save ahead is under way (before the node lets go of
// its data dir).
func (f *tokenFloor) wait() {
	if f != nil {
		f.ahead.Wait()
	}
}

// store saves v unless a save of at least v came first, and raises next.
func (f *tokenFloor) store(v uint64) error {
	f.write.Lock()
	defer f.write.Unlock()
	f.mu.Lock()
	saved := f.next
	f.mu.Unlock()
	if v <= saved {
		return nil
	}
	if err := f.save(v); err != nil {
		return err
	}
	f.mu.Lock()
	f.next = v
	f.mu.Unlock()
	return nil
}

// settle brings the floor down to just above the last token on a clean
// shutdown, when no entry can be applied any more, so that a restart does
// not skip a step of tokens. It never lowers it below last+1.
func (f *tokenFloor) settle(last uint64) error {
	if f == nil {
		return nil
	}
	f.ahead.Wait()
	f.write.Lock()
	defer f.write.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if last+1 >= f.next {
		return nil
	}
	if err := f.save(last + 1); err != nil {
		return err
	}
	f.next = last + 1
	return nil
}

// save writes v atomically: a synced temporary file renamed over the old
// one, then the directory synced.
func (f *tokenFloor) save(v uint64) error {
	path := filepath.Join(f.dir, TokenFloorFile)
	tmp := path + ".tmp"
	if err := writeSynced(tmp, []byte(strconv.FormatUint(v, 10)+"\n")); err != nil {
		return fmt.Errorf("cluster: save token floor: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("cluster: save token floor: %w", err)
	}
	if err := syncDir(f.dir); err != nil {
		return fmt.Errorf("cluster: save token floor: %w", err)
	}
	return nil
}

func writeSynced(path string, data []byte) error {
	fh, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = fh.Write(data)
	if err == nil {
		err = fh.Sync()
	}
	return errors.Join(err, fh.Close())
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// raiseTokens runs when this node takes over, after the barrier and before
// it serves: if the saved floor is above the state's token counter (always
// after a crash, which leaves the floor up to a step ahead; and after a
// disk lost the log's end), it commits fsm.RaiseTokens so that every later
// token is above every token this node ever applied. It reports whether
// the node may serve, retrying while it still leads.
func (n *Node) raiseTokens() bool {
	for {
		floor := n.floor.value()
		var last uint64
		n.m.read(func(st *fsm.State) { last = st.LastToken() })
		if floor <= last+1 {
			return true
		}
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
		_, err := n.propose(ctx, []fsm.Command{&fsm.RaiseTokens{Floor: floor}}, false)
		cancel()
		if err == nil {
			n.log.Info("raised the token counter to the saved floor", "floor", floor, "was", last)
			return true
		}
		if n.raft.State() != raft.Leader {
			return false
		}
		n.log.Warn("took over but could not yet raise the token counter; retrying", "err", err)
		select {
		case <-n.stop:
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// settleFloor lowers the saved floor to just above the last token after
// raft has stopped cleanly.
func (n *Node) settleFloor() error {
	var last uint64
	n.m.read(func(st *fsm.State) { last = st.LastToken() })
	return n.floor.settle(last)
}
