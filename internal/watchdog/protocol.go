package watchdog

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"syscall"
)

// The supervisor writes deadlines to the watchdog's fd 3; the watchdog
// writes reports, one JSON object a line, to its fd 4.
const (
	deadlineFD = 3
	reportFD   = 4
)

// A deadline message is 8 bytes: CLOCK_MONOTONIC nanoseconds, little
// endian. Under PIPE_BUF, so every write is atomic.
const deadlineLen = 8

func writeDeadline(w io.Writer, mono int64) error {
	var b [deadlineLen]byte
	binary.LittleEndian.PutUint64(b[:], uint64(mono))
	_, err := w.Write(b[:])
	return err
}

func readDeadline(r io.Reader) (int64, error) {
	var b [deadlineLen]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	return int64(binary.LittleEndian.Uint64(b[:])), nil
}

// report is one line from the watchdog to the supervisor: first Pid (or
// Error), last Status once the command exited and its tree is gone.
type report struct {
	Pid     int     `json:"pid,omitempty"`     // the command started
	Error   string  `json:"error,omitempty"`   // the command could not be started
	Status  *uint32 `json:"status,omitempty"`  // the command's wait status
	Stopped string  `json:"stopped,omitempty"` // why the watchdog stopped the command, if it did
	Gone    bool    `json:"gone,omitempty"`    // with Status: the whole tree was seen gone
}

func writeReport(w io.Writer, r report) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func statusOf(ws syscall.WaitStatus) *uint32 {
	s := uint32(ws)
	return &s
}
