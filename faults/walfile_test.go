package faults

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// The raft log is hashicorp/raft-wal's (v0.4) segment files, wal/*.wal: a
// 32-byte file header, then 8-byte-aligned frames, each an 8-byte header
// (type byte, 3 reserved, then length — or a CRC for a commit frame) and
// its payload padded to 8 bytes. Writing stops at the first all-zero
// header (segments are preallocated). Only as much of the format as it
// takes to damage it on purpose is read here.

const (
	walFileHeaderLen  = 32
	walFrameHeaderLen = 8
	walFrameEntry     = 1
	walFrameIndex     = 2
	walFrameCommit    = 3
)

// walFrame is one frame of a segment file.
type walFrame struct {
	offset int64
	typ    byte
	len    int // payload length (0 for a commit)
}

// lastSegment is the newest segment file of dataDir's log.
func lastSegment(dataDir string) (string, error) {
	segs, err := filepath.Glob(filepath.Join(dataDir, "wal", "*.wal"))
	if err != nil || len(segs) == 0 {
		return "", fmt.Errorf("no wal segment in %s (%v)", dataDir, err)
	}
	slices.Sort(segs) // names start with the zero-padded base index
	return segs[len(segs)-1], nil
}

// walFrames reads the frames of a segment file up to the end of the
// written data.
func walFrames(path string) ([]walFrame, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var frames []walFrame
	off := int64(walFileHeaderLen)
	for off+walFrameHeaderLen <= int64(len(b)) {
		h := b[off : off+walFrameHeaderLen]
		f := walFrame{offset: off, typ: h[0]}
		switch h[0] {
		case 0:
			return frames, nil // the end of the written data
		case walFrameEntry, walFrameIndex:
			f.len = int(binary.LittleEndian.Uint32(h[4:8]))
		case walFrameCommit:
		default:
			return nil, fmt.Errorf("%s: frame type %d at offset %d", path, h[0], off)
		}
		frames = append(frames, f)
		off += walFrameHeaderLen + int64(f.len+(walFrameHeaderLen-f.len%walFrameHeaderLen)%walFrameHeaderLen)
	}
	return frames, nil
}

// ofType keeps the frames of type typ.
func ofType(frames []walFrame, typ byte) []walFrame {
	var out []walFrame
	for _, f := range frames {
		if f.typ == typ {
			out = append(out, f)
		}
	}
	return out
}

// writeAt overwrites len(b) bytes of path at off.
func writeAt(path string, off int64, b []byte) error {
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
