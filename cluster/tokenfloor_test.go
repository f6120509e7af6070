package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/fsm"
)

func TestTokenFloorFile(t *testing.T) {
	dir := t.TempDir()
	f, err := openTokenFloor(dir)
	if err != nil || f.value() != 0 {
		t.Fatalf("a new data dir: floor %d, %v", f.value(), err)
	}
	if err := f.cover(5); err != nil {
		t.Fatal(err)
	}
	if v, err := ReadTokenFloor(dir); err != nil || v != 5+tokenFloorStep {
		t.Fatalf("after covering token 5 the saved floor is %d (%v), want %d", v, err, 5+tokenFloorStep)
	}
	if err := f.settle(3); err != nil { // below an applied token: settle keeps last+1 only
		t.Fatal(err)
	}
	if v, _ := ReadTokenFloor(dir); v != 4 {
		t.Fatalf("settled at last token 3: floor %d, want 4", v)
	}
	if err := f.settle(100); err != nil || f.value() != 4 {
		t.Fatalf("settle never raises: floor %d, %v", f.value(), err)
	}
	if err := os.WriteFile(filepath.Join(dir, TokenFloorFile), []byte("12x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openTokenFloor(dir); err == nil {
		t.Fatal("a damaged token floor file was accepted")
	}
}

// No token goes out before the floor above it is saved: while the floor
// file cannot be written, an entry whose grants pass the floor is answered
// with Unavailable; once it can, a retry gets the grant, under the floor.
func TestTokensAreNotAnsweredUntilTheFloorIsSaved(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	n := openNode(t, cfg)
	defer n.Close()
	ctx := context.Background()
	if r, err := n.Propose(ctx, acquireCmd("first", time.Hour, 0, "first")); err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	// A directory where the floor's temporary file goes: saving fails.
	tmp := filepath.Join(cfg.DataDir, TokenFloorFile+".tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	floor := n.floor.value()
	var cmds []fsm.Command
	for i := range tokenFloorStep + 10 { // one entry whose tokens pass the floor
		cmds = append(cmds, acquireCmd(fmt.Sprint("bulk", i), time.Hour, 0, fmt.Sprint("bulk/", i)))
	}
	if _, err := n.ProposeAll(ctx, cmds); err == nil || !strings.Contains(err.Error(), "token floor") {
		t.Fatalf("grants past the floor %d while it cannot be saved: %v, want an error naming the token floor", floor, err)
	}
	if v, _ := ReadTokenFloor(cfg.DataDir); v != floor {
		t.Fatalf("saved floor %d, want it unchanged at %d", v, floor)
	}
	if err := os.Remove(tmp); err != nil {
		t.Fatal(err)
	}
	last := cmds[len(cmds)-1].(*fsm.Acquire)
	r, err := n.Propose(ctx, last)
	if err != nil || r.Lease == nil {
		t.Fatalf("retry once the floor can be saved: %+v %v", r, err)
	}
	if v, _ := ReadTokenFloor(cfg.DataDir); r.Lease.Token >= v {
		t.Fatalf("token %d answered with the saved floor at %d", r.Lease.Token, v)
	}
}

// The floor is saved ahead of the tokens, in the background: when the
// tokens rise at a pace that gives a save time to finish, no cover (no
// Apply) waits for one after the first, and the saved floor stays above
// every token covered.
func TestTheFloorIsSavedAheadOfTheTokens(t *testing.T) {
	dir := t.TempDir()
	f, err := openTokenFloor(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.wait()
	const last = 5 * tokenFloorStep
	for tok := uint64(1); tok <= last; tok++ {
		if err := f.cover(tok); err != nil {
			t.Fatal(err)
		}
		if saved, _ := ReadTokenFloor(dir); saved <= tok {
			t.Fatalf("token %d covered with the saved floor at %d", tok, saved)
		}
		if tok%32 == 0 { // the pace of a busy node: a save finishes within 32 tokens
			deadline := time.Now().Add(10 * time.Second)
			for f.value() > 0 && func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.saving }() {
				if time.Now().After(deadline) {
					t.Fatal("a save ahead did not finish within 10s")
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
	f.wait()
	if f.waited != 1 {
		t.Errorf("%d covers of %d tokens waited for a save, want only the first", f.waited, last)
	}
}
