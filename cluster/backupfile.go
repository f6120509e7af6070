package cluster

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/leasehold/leasehold/fsm"
)

// A backup file (`leasehold snapshot save`) is a magic line, one line of
// JSON (BackupHeader), then the encoded state: Size bytes whose SHA-256
// the header holds. The header is text so that `head -2 FILE` shows what
// it is; the checksum covers the state, which is all a restore uses.

// backupMagic is the first line of a backup file.
const backupMagic = "LEASEHOLD-BACKUP 1\n"

// maxBackupHeader bounds the header line, so a damaged file cannot make a
// reader take a huge line.
const maxBackupHeader = 4 << 10

// BackupHeader describes the state in a backup file.
type BackupHeader struct {
	Index     uint64    `json:"index"`      // the log index the state reflects
	Term      uint64    `json:"term"`       // the raft term when it was taken
	Format    int       `json:"format"`     // the state encoding's (snapshot) version
	Size      int64     `json:"size"`       // bytes of state after the header
	SHA256    string    `json:"sha256"`     // of those bytes, hex
	NodeID    string    `json:"node_id"`    // the node it was taken from
	TakenAt   time.Time `json:"taken_at"`   // that node's wall clock
	LastToken uint64    `json:"last_token"` // the largest fencing token in the state
}

// WriteBackupHeader writes the magic line and h; the state follows.
func WriteBackupHeader(w io.Writer, h BackupHeader) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, backupMagic+string(b)+"\n")
	return err
}

// BackupDamagedError says a backup file cannot be used, and why.
type BackupDamagedError struct {
	File, Reason string
}

func (e *BackupDamagedError) Error() string {
	return fmt.Sprintf("backup %s is damaged or not a leasehold backup: %s; nothing was written", e.File, e.Reason)
}

// ReadBackup reads a backup file whole and checks it: its header, its
// length and the state's SHA-256. A file that fails any check is a
// *BackupDamagedError.
func ReadBackup(path string) (BackupHeader, []byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return BackupHeader{}, nil, fmt.Errorf("open backup: %w", err)
	}
	defer f.Close()
	damaged := func(format string, args ...any) error {
		return &BackupDamagedError{File: path, Reason: fmt.Sprintf(format, args...)}
	}
	r := bufio.NewReader(f)
	magic := make([]byte, len(backupMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != backupMagic {
		return BackupHeader{}, nil, damaged("it does not start with %q", backupMagic[:len(backupMagic)-1])
	}
	line, err := r.ReadSlice('\n')
	if err != nil || len(line) > maxBackupHeader {
		return BackupHeader{}, nil, damaged("its header line is missing or too long")
	}
	var h BackupHeader
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return BackupHeader{}, nil, damaged("its header is not valid: %v", err)
	}
	if h.Size < 0 || h.Size > 1<<40 {
		return BackupHeader{}, nil, damaged("its header gives a size of %d bytes", h.Size)
	}
	if st, err := f.Stat(); err == nil && st.Size() != int64(len(backupMagic)+len(line))+h.Size {
		return h, nil, damaged("it is %d bytes long; its header promises %d (a truncated or extended copy?)",
			st.Size(), int64(len(backupMagic)+len(line))+h.Size)
	}
	state := make([]byte, h.Size)
	if _, err := io.ReadFull(r, state); err != nil {
		return h, nil, damaged("its state is cut short: %v", err)
	}
	if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
		return h, nil, damaged("it has bytes after its state")
	}
	sum := sha256.Sum256(state)
	if got := hex.EncodeToString(sum[:]); got != h.SHA256 {
		return h, nil, damaged("its state's SHA-256 is %s, its header says %s", got, h.SHA256)
	}
	return h, state, nil
}

// BackupInventory counts what a backup's state holds.
type BackupInventory = fsm.Inventory

// InspectBackup decodes a backup's state (as a restore would) and counts
// what it holds.
func InspectBackup(state []byte) (BackupInventory, error) {
	st, err := fsm.Restore(state, fsm.DefaultConfig(), nil)
	if err != nil {
		return BackupInventory{}, err
	}
	return st.Inventory(), nil
}
