package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
)

// A backup saved from a node under load (acquires and KV puts running)
// restores into a fresh node of a new cluster: every lease and key
// acknowledged before the save is there with its token and value, the
// next grant's token is above every token the old node ever gave (even
// after the backup), a damaged copy of the file is refused with nothing
// written, and so is a restore into a data dir that is not empty; a
// second node joins the restored one and catches up.
func TestSnapshotSaveUnderLoadAndRestore(t *testing.T) {
	old := startNode(t)
	c, err := client.New(client.Config{Endpoints: []string{old.url}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Load: two writers acquire leases (kept, with an hour's TTL) and put
	// keys until told to stop, recording what was acknowledged and when.
	type acked struct {
		at     time.Time
		lease  uint64
		token  uint64
		key    string
		value  string
		secret string
	}
	var mu sync.Mutex
	var done []acked
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				l, err := c.Acquire(ctx, fmt.Sprintf("load/%d/%d", w, i), client.TTL(time.Hour), client.ManualRenew())
				if err != nil {
					t.Errorf("acquire under load: %v", err)
					return
				}
				key, value := fmt.Sprintf("kv/%d/%d", w, i), fmt.Sprintf("v%d", i)
				if _, err := c.Put(ctx, key, []byte(value)); err != nil {
					t.Errorf("put under load: %v", err)
					return
				}
				mu.Lock()
				done = append(done, acked{at: time.Now(), lease: l.ID(), token: l.Token(), key: key, value: value, secret: l.Secret()})
				mu.Unlock()
			}
		}()
	}
	// Let the load run, then save while it still runs.
	checkFor(t, time.Minute, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(done) < 20 {
			return fmt.Errorf("%d acquires and puts so far", len(done))
		}
		return nil
	})
	file := filepath.Join(t.TempDir(), "backup.lhsnap")
	saveStart := time.Now()
	old.lhOK("snapshot", "save", file)
	time.Sleep(200 * time.Millisecond) // more load after the save: tokens the backup lacks
	close(stop)
	wg.Wait()
	if _, err := os.Stat(file + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("save left %s.tmp behind (%v)", file, err)
	}

	var before []acked
	maxToken := uint64(0)
	for _, a := range done {
		if a.at.Before(saveStart) {
			before = append(before, a)
		}
		maxToken = max(maxToken, a.token)
	}
	r := lhEnv(t, childEnv(), "snapshot", "inspect", "--json", file)
	if r.code != 0 {
		t.Fatalf("inspect: %s", r)
	}
	var info cliout.BackupInspected
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&info); err != nil {
		t.Fatalf("inspect --json output %q: %v", r.stdout, err)
	}
	if info.Leases < len(before) || info.Keys < len(before) || info.Index == 0 || info.Format < 10 || len(info.SHA256) != 64 {
		t.Fatalf("inspect: %+v, want at least %d leases and keys", info, len(before))
	}

	// A damaged copy is refused, and nothing is written.
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-10] ^= 0xff
	bad := filepath.Join(t.TempDir(), "damaged.lhsnap")
	if err := os.WriteFile(bad, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	badDir := filepath.Join(t.TempDir(), "never")
	r = lhEnv(t, childEnv(), "snapshot", "restore", bad, "--data-dir", badDir)
	if r.code == 0 || !strings.Contains(r.stderr, "damaged") || !strings.Contains(r.stderr, "SHA-256") {
		t.Fatalf("restore of a damaged file: %s", r)
	}
	if _, err := os.Stat(badDir); !os.IsNotExist(err) {
		t.Fatalf("a refused restore created %s (%v)", badDir, err)
	}
	// A data dir in use is refused.
	r = lhEnv(t, childEnv(), "snapshot", "restore", file, "--data-dir", old.dataDir)
	if r.code == 0 || !strings.Contains(r.stderr, "not empty") {
		t.Fatalf("restore into a non-empty data dir: %s", r)
	}

	// Restore into a fresh node of a new cluster and start it.
	fresh := newNode(t)
	fresh.args = []string{"--node-id", "restored-1"}
	r = lhEnv(t, childEnv(), "snapshot", "restore", file, "--data-dir", fresh.dataDir, "--node-id", "restored-1",
		"--advertise", fresh.raftAddr, "--json")
	if r.code != 0 {
		t.Fatalf("restore: %s", r)
	}
	fresh.start()
	rc, err := client.New(client.Config{Endpoints: []string{fresh.url}})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	members, err := rc.Members(ctx)
	if err != nil || len(members) != 1 || members[0].ID != "restored-1" {
		t.Fatalf("members of the restored cluster: %+v, %v; want restored-1 alone", members, err)
	}
	for _, a := range before {
		res, err := rc.Get(ctx, strings.Replace(a.key, "kv/", "load/", 1))
		if err != nil || res.Holder == nil || res.Holder.ID != a.lease || res.Holder.Token != a.token {
			t.Fatalf("lease %d (token %d) acknowledged before the save: restored as %+v, %v", a.lease, a.token, res, err)
		}
		v, _, err := rc.GetKey(ctx, a.key)
		if err != nil || string(v) != a.value {
			t.Fatalf("key %s acknowledged before the save: restored as %q, %v", a.key, v, err)
		}
	}
	// A restored lease is still its holder's: its secret renews it.
	if err := rc.ReleaseByID(ctx, before[0].lease, before[0].secret); err != nil {
		t.Fatalf("release of a restored lease by its secret: %v", err)
	}
	l, err := rc.Acquire(ctx, "after/restore", client.ManualRenew())
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() <= maxToken || l.Token() <= info.LastToken {
		t.Fatalf("first token after the restore %d, not above the old node's largest %d (backup's %d)", l.Token(), maxToken, info.LastToken)
	}
	// The restored node is a new cluster's first node: another joins it
	// and catches up.
	second := newNode(t)
	second.args = []string{"--node-id", "restored-2", "--join", fresh.url}
	second.start()
	checkFor(t, time.Minute, func() error {
		st, err := rc.ClusterStatus(ctx)
		if err != nil {
			return err
		}
		for _, s := range st {
			if s.ID == "restored-2" && s.AppliedIndex >= info.Index && s.Error == "" {
				return nil
			}
		}
		return fmt.Errorf("restored-2 has not caught up: %+v", st)
	})
	t.Logf("saved %d bytes at index %d under load (%d leases, %d keys); %d acknowledged before the save; first token after the restore %d (old node's largest %d)",
		info.Size, info.Index, info.Leases, info.Keys, len(before), l.Token(), maxToken)
}
