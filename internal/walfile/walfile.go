// Package walfile reads just enough of a leasehold data dir's raft log
// (hashicorp/raft-wal v0.4 segment files, wal/*.wal) for tests to damage
// it on purpose: a 32-byte file header, then 8-byte-aligned frames, each
// an 8-byte header (type byte, 3 reserved, then length — or a CRC for a
// commit frame) and its payload padded to 8 bytes. Writing stops at the
// first all-zero header (segments are preallocated). The node's own
// reader is cluster's; this one trusts what it reads.
package walfile

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

const (
	FileHeaderLen  = 32
	FrameHeaderLen = 8
	FrameEntry     = 1
	FrameIndex     = 2
	FrameCommit    = 3
)

// Frame is one frame of a segment file.
type Frame struct {
	Offset int64
	Type   byte
	Len    int // payload length (0 for a commit)
}

// LastSegment is the newest segment file of dataDir's log.
func LastSegment(dataDir string) (string, error) {
	segs, err := filepath.Glob(filepath.Join(dataDir, "wal", "*.wal"))
	if err != nil || len(segs) == 0 {
		return "", fmt.Errorf("no wal segment in %s (%v)", dataDir, err)
	}
	slices.Sort(segs) // names start with the zero-padded base index
	return segs[len(segs)-1], nil
}

// Frames reads the frames of a segment file up to the end of the written
// data.
func Frames(path string) ([]Frame, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var frames []Frame
	off := int64(FileHeaderLen)
	for off+FrameHeaderLen <= int64(len(b)) {
		h := b[off : off+FrameHeaderLen]
		f := Frame{Offset: off, Type: h[0]}
		switch h[0] {
		case 0:
			return frames, nil // the end of the written data
		case FrameEntry, FrameIndex:
			f.Len = int(binary.LittleEndian.Uint32(h[4:8]))
		case FrameCommit:
		default:
			return nil, fmt.Errorf("%s: frame type %d at offset %d", path, h[0], off)
		}
		frames = append(frames, f)
		off += FrameHeaderLen + int64(f.Len+(FrameHeaderLen-f.Len%FrameHeaderLen)%FrameHeaderLen)
	}
	return frames, nil
}

// OfType keeps the frames of type typ.
func OfType(frames []Frame, typ byte) []Frame {
	var out []Frame
	for _, f := range frames {
		if f.Type == typ {
			out = append(out, f)
		}
	}
	return out
}

// Entries are the entry frames of a segment file with enough of them (4)
// to damage one in the middle.
func Entries(path string) ([]Frame, error) {
	frames, err := Frames(path)
	if err != nil {
		return nil, err
	}
	entries := OfType(frames, FrameEntry)
	if len(entries) < 4 {
		return nil, fmt.Errorf("%s holds %d entries, too few", path, len(entries))
	}
	return entries, nil
}

// WriteAt overwrites len(b) bytes of path at off.
func WriteAt(path string, off int64, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, off); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
