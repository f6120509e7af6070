package cluster

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/fsm"
)

// backupBytes is a whole backup file of state.
func backupBytes(t testing.TB, state []byte) []byte {
	t.Helper()
	sum := sha256.Sum256(state)
	var b bytes.Buffer
	h := BackupHeader{Index: 7, Term: 2, Format: 10, Size: int64(len(state)), SHA256: hex.EncodeToString(sum[:]),
		NodeID: "n1", TakenAt: time.Unix(1_700_000_000, 0).UTC(), LastToken: 7}
	if err := WriteBackupHeader(&b, h); err != nil {
		t.Fatal(err)
	}
	b.Write(state)
	return b.Bytes()
}

func writeTemp(t testing.TB, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "b")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A whole backup reads back as written; every kind of damage is refused as
// a *BackupDamagedError that says what is wrong.
func TestReadBackupRefusesDamage(t *testing.T) {
	state := fsm.New(fsm.DefaultConfig(), nil).Snapshot()
	good := backupBytes(t, state)
	h, got, err := ReadBackup(writeTemp(t, good))
	if err != nil || !bytes.Equal(got, state) || h.Index != 7 || h.NodeID != "n1" {
		t.Fatalf("a whole backup: %+v, %v", h, err)
	}
	flip := func(i int) []byte { b := bytes.Clone(good); b[i] ^= 1; return b }
	for name, tc := range map[string]struct {
		data   []byte
		reason string
	}{
		"empty":            {nil, "does not start with"},
		"not a backup":     {[]byte("LHSNAP\x0a..."), "does not start with"},
		"state byte flip":  {flip(len(good) - 1), "SHA-256"},
		"truncated":        {good[:len(good)-1], "bytes long"},
		"extended":         {append(bytes.Clone(good), 0), "bytes long"},
		"header damaged":   {flip(len(backupMagic) + 3), "header"},
		"no header line":   {[]byte(backupMagic), "header line"},
		"header only size": {[]byte(backupMagic + `{"size":-1}` + "\n"), "size"},
	} {
		_, _, err := ReadBackup(writeTemp(t, tc.data))
		var de *BackupDamagedError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), tc.reason) || !strings.Contains(err.Error(), "nothing was written") {
			t.Errorf("%s: %v, want a damage error about %q", name, err, tc.reason)
		}
	}
}

// A restore refuses a data dir that holds anything, and a token floor not
// above the state's tokens, before writing anything.
func TestSeedDataDirRefusals(t *testing.T) {
	s := fsm.New(fsm.DefaultConfig(), nil)
	s.Apply(3, &fsm.Batch{Time: 1, Cmds: []fsm.Command{&fsm.Acquire{Resources: []string{"r"}, TTL: time.Second}}})
	seed := Seed{NodeID: "n9", Advertise: "127.0.0.1:1", Index: 3, Term: 1, State: s.Snapshot(), TokenFloor: 4}
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "x"), nil, 0o600)
	if err := SeedDataDir(full, seed); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("a non-empty dir: %v", err)
	}
	low := seed
	low.TokenFloor = 3
	dir := filepath.Join(t.TempDir(), "new")
	if err := SeedDataDir(dir, low); err == nil || !strings.Contains(err.Error(), "not above") {
		t.Fatalf("a floor at the state's last token: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("a refused restore made %s", dir)
	}
	if err := SeedDataDir(dir, seed); err != nil {
		t.Fatal(err)
	}
	if f, err := ReadTokenFloor(dir); err != nil || f != 4 {
		t.Fatalf("token floor %d, %v; want 4", f, err)
	}
}

// ReadBackup never panics or reads past what a file holds, whatever it
// holds.
func FuzzReadBackup(f *testing.F) {
	f.Add(backupBytes(f, fsm.New(fsm.DefaultConfig(), nil).Snapshot()))
	f.Add([]byte(backupMagic + "{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, state, err := ReadBackup(writeTemp(t, data))
		if err == nil && int64(len(state)) != h.Size {
			t.Fatalf("read %d bytes of state, header says %d", len(state), h.Size)
		}
	})
}
