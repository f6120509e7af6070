package cluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"

	"github.com/leasehold/leasehold/fsm"
)

// The format is raft-wal v0.4's (segment/format.go): a 32-byte file
// header, then frames of an 8-byte header (type, 3 zero bytes, length or
// checksum) and a payload padded to 8 bytes. A write (one append) is its
// entry frames, on the write that fills the segment an index frame, and a
// commit frame holding the CRC-32C of every byte of the write (the first
// write's includes the file header). raft-wal reads a segment's frames up
// to the first header that is zero or not a frame and takes that for the
// end of the log; it checks only the last write's checksum.
const (
	segHeaderLen   = 32
	segMagic       = 0x58eb6b0d
	frameHdrLen    = 8
	frameEntry     = 1
	frameIndex     = 2
	frameCommit    = 3
	segMaxFrameLen = segment.MaxEntrySize
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// walEntry is an entry frame of a write that verifies.
type walEntry struct {
	off   int64 // offset of its frame header
	index uint64
	term  uint64
}

// walWrite is a write that verifies: its frames from start, and its
// commit frame ending at end, whose checksum matches.
type walWrite struct {
	start, end int64
	entries    []walEntry
	indexAt    int64 // offset of its index frame (the write that sealed the segment), -1 if none
}

// segScan is what reading one segment file found. Every write that
// verifies is kept, those after a damaged one too: they tell damage from
// the end of the log, and Recover can still use them.
type segScan struct {
	info    types.SegmentInfo
	path    string
	missing bool // an open segment's file does not exist: raft-wal creates it
	// writes are the writes that verify, in file order.
	writes []walWrite
	// end is where the writes that follow on from the file header end: raft-wal
	// reads the segment up to there.
	end int64
	// nz is the end of the last byte that is not zero: nothing was written after it.
	nz     int64
	damage *DamageError
	// torn says damage is the open segment's unfinished last write: what a
	// crash in the middle of an append leaves (raft-wal drops it; it was
	// never acknowledged, since the append had not returned). Nothing
	// verifies after it.
	torn bool
}

func (sc *segScan) sealed() bool { return !sc.info.SealTime.IsZero() }

// fail records the first damage found in the segment.
func (sc *segScan) fail(off int64, format string, args ...any) {
	if sc.damage == nil {
		sc.damage = &DamageError{File: sc.path, Offset: off, Reason: fmt.Sprintf(format, args...)}
	}
}

// scanSegment reads a segment file and verifies every write in it.
func scanSegment(walDir string, si types.SegmentInfo) *segScan {
	sc := &segScan{info: si, path: filepath.Join(walDir, segment.FileName(si)), end: segHeaderLen}
	data, err := os.ReadFile(sc.path)
	if errors.Is(err, os.ErrNotExist) && !sc.sealed() {
		sc.missing = true // a crash before the first write to it
		return sc
	}
	if errors.Is(err, os.ErrNotExist) {
		sc.fail(0, "the segment file is missing")
		return sc
	}
	if err != nil {
		sc.fail(0, "cannot read it: %v", err)
		return sc
	}
	r := segReader{data: data, nz: lastNonZero(data)}
	sc.nz = r.nz
	headerOK := len(data) >= segHeaderLen && binary.LittleEndian.Uint32(data[0:4]) == segMagic &&
		allZero(data[4:8]) && binary.LittleEndian.Uint64(data[8:16]) == si.BaseIndex &&
		binary.LittleEndian.Uint64(data[16:24]) == si.ID && binary.LittleEndian.Uint64(data[24:32]) == si.Codec
	if !headerOK {
		sc.fail(0, "the segment's file header does not match the log's metadata (base index %d, segment %d)", si.BaseIndex, si.ID)
	}
	writes, stop, why := r.walk(0, segHeaderLen)
	sc.writes, sc.end = writes, stop
	if sealsAt(writes) && why == "" {
		sc.checkIndex(data)
		sc.decode(data)
		return sc
	}
	// Anything that verifies after where the walk stopped makes that stop
	// damage, not the end of the log.
	from, next := stop+frameHdrLen, int64(-1)
	for q := r.resync(from); q >= 0; q = r.resync(from) {
		if next < 0 {
			next = q
		}
		more, s, w := r.walk(q, q)
		sc.writes = append(sc.writes, more...)
		from = s + frameHdrLen
		if sealsAt(more) && w == "" {
			break
		}
	}
	switch {
	case why == "" && next >= 0:
		at := max(stop, segHeaderLen) // the first write starts with the file header
		sc.fail(at, "the frame header at byte %d is zero, but writes that verify follow it (from byte %d): "+
			"the log does not end there", at, next)
	case why != "" && next >= 0:
		sc.fail(stop, "%s; writes that verify follow it (from byte %d)", why, next)
	case why != "":
		sc.fail(stop, "%s", why)
		sc.torn = !sc.sealed()
	case sc.sealed():
		sc.fail(stop, "the sealed segment ends at byte %d without its index frame", stop)
	}
	if !headerOK && len(sc.writes) == 0 && !sc.sealed() {
		sc.torn = true // the first write, which carries the header, never completed
	}
	// raft-wal preallocates every segment to its size limit before it
	// writes to it, so a shorter file that holds anything lost its end. (A
	// crash between creating the tail and preallocating it leaves a short
	// file with nothing in it, which raft-wal starts over.)
	if size := int64(len(data)); si.SizeLimit > 0 && size < int64(si.SizeLimit) && (sc.sealed() || r.nz > 0) {
		sc.damage, sc.torn = nil, false
		sc.fail(size, "the file is %d bytes, shorter than the %d it was created with: its end was cut off", size, si.SizeLimit)
	}
	sc.decode(data)
	return sc
}

// writesAfterDamage reports whether writes that verify follow the damage.
func (sc *segScan) writesAfterDamage() bool {
	return sc.damage != nil && len(sc.writes) > 0 && sc.writes[len(sc.writes)-1].start > sc.damage.Offset
}

// sealsAt reports whether the last of writes sealed its segment.
func sealsAt(writes []walWrite) bool { return len(writes) > 0 && writes[len(writes)-1].indexAt >= 0 }

// checkIndex checks a sealed segment's index frame against its entries:
// raft-wal finds a sealed segment's entries through it.
func (sc *segScan) checkIndex(data []byte) {
	last := sc.writes[len(sc.writes)-1]
	var offs []int64
	for _, w := range sc.writes {
		for _, e := range w.entries {
			offs = append(offs, e.off)
		}
	}
	if (sc.sealed() && sc.info.IndexStart != uint64(last.indexAt+frameHdrLen)) || !indexMatches(data[last.indexAt:], offs) {
		sc.fail(last.indexAt, "the segment's index frame does not match its entries")
	}
}

func indexMatches(frame []byte, offs []int64) bool {
	n := int(binary.LittleEndian.Uint32(frame[4:]))
	if n != 4*len(offs) {
		return false
	}
	for i, off := range offs {
		if int64(binary.LittleEndian.Uint32(frame[frameHdrLen+4*i:])) != off {
			return false
		}
	}
	return true
}

// decode reads every entry of the writes that verify as raft and the state
// machine will. A write with an entry that does not decode is dropped
// whole (as damage), and so is every entry after it in the segment if its
// position, not its content, gave its index.
func (sc *segScan) decode(data []byte) {
	codec := &raftwal.BinaryCodec{}
	want := sc.info.BaseIndex // the index the next entry has, while the writes follow on from the header
	kept := sc.writes[:0]
	for _, w := range sc.writes {
		if w.start >= sc.end {
			want = 0 // after damage, only the entries' own indexes count
		}
		ok := true
		for i := range w.entries {
			e := &w.entries[i]
			n := int64(binary.LittleEndian.Uint32(data[e.off+4:]))
			var l raft.Log
			err := codec.Decode(data[e.off+frameHdrLen:e.off+frameHdrLen+n], &l)
			if err == nil && want > 0 && l.Index != want {
				err = fmt.Errorf("it says it is entry %d", l.Index)
			}
			if err == nil && l.Type == raft.LogCommand {
				_, err = fsm.DecodeBatch(l.Data)
			}
			if err != nil {
				ix := l.Index
				if want > 0 {
					ix = want
				}
				if sc.torn {
					sc.damage, sc.torn = nil, false // this one comes first, and is damage
				}
				sc.fail(e.off, "entry %d cannot be read: %v", ix, err)
				ok = false
				break
			}
			e.index, e.term = l.Index, l.Term
			if want > 0 {
				want++
			}
		}
		if !ok {
			want = 0 // positions no longer give indexes
			continue
		}
		kept = append(kept, w)
	}
	sc.writes = kept
}

// segReader walks the frames of a segment file held in memory.
type segReader struct {
	data []byte
	nz   int64
}

// frame parses the frame header at pos and gives its type, its length
// field and the size of the whole frame; ok is false for a header that is
// not a frame (zero, reserved bytes set, an unknown type, a length that
// runs past the file).
func (r *segReader) frame(pos int64) (typ byte, n uint32, size int64, ok bool) {
	if pos+frameHdrLen > int64(len(r.data)) {
		return 0, 0, 0, false
	}
	h := r.data[pos : pos+frameHdrLen]
	if h[1]|h[2]|h[3] != 0 {
		return 0, 0, 0, false
	}
	n = binary.LittleEndian.Uint32(h[4:])
	switch h[0] {
	case frameCommit:
		return frameCommit, n, frameHdrLen, true
	case frameEntry, frameIndex:
		size = frameHdrLen + int64(n) + (frameHdrLen-int64(n)%frameHdrLen)%frameHdrLen
		if n > segMaxFrameLen || pos+size > int64(len(r.data)) {
			return 0, 0, 0, false
		}
		return h[0], n, size, true
	}
	return 0, 0, 0, false
}

// walk follows writes from crcStart (their frames from pos) for as long as
// they verify, and stops after a write that seals the segment. It returns
// those writes and where the first that does not verify starts, with why
// ("" when it stopped at the end of what was written: a zero header, or the
// end of the file, where a write would start).
func (r *segReader) walk(crcStart, pos int64) (writes []walWrite, stop int64, why string) {
	w := walWrite{start: crcStart, indexAt: -1}
	for {
		typ, n, size, ok := r.frame(pos)
		if !ok {
			switch {
			case len(w.entries) == 0 && w.indexAt < 0 && (pos+frameHdrLen > int64(len(r.data)) || allZero(r.data[pos:pos+frameHdrLen])):
				return writes, crcStart, ""
			case pos+frameHdrLen > int64(len(r.data)):
				return writes, crcStart, fmt.Sprintf("the write that starts at byte %d runs past the end of the file", crcStart)
			case allZero(r.data[pos : pos+frameHdrLen]):
				return writes, crcStart, fmt.Sprintf("the write that starts at byte %d stops at byte %d without its commit frame", crcStart, pos)
			}
			return writes, crcStart, fmt.Sprintf("the frame header at byte %d, in the write that starts at byte %d, is not a valid frame (% x)",
				pos, crcStart, r.data[pos:pos+frameHdrLen])
		}
		switch typ {
		case frameEntry:
			w.entries = append(w.entries, walEntry{off: pos})
		case frameIndex:
			w.indexAt = pos
		case frameCommit:
			if got := crc32.Checksum(r.data[crcStart:pos], castagnoli); got != n {
				return writes, crcStart, fmt.Sprintf("the write from byte %d to %d fails its checksum (stored %08x, computed %08x)", crcStart, pos, n, got)
			}
			w.end = pos + size
			writes = append(writes, w)
			if w.indexAt >= 0 {
				return writes, w.end, "" // a sealed segment ends with its index
			}
			crcStart = w.end
			w = walWrite{start: crcStart, indexAt: -1}
		}
		pos += size
	}
}

// resync finds the first write that verifies at or after from, or -1. A
// write starts after a commit frame, so only those places are tried, and
// from itself (just past a frame that did not verify, which may have been
// a damaged commit frame): each try follows one write's frames, so the
// whole search reads the file about once.
func (r *segReader) resync(from int64) int64 {
	from += (frameHdrLen - from%frameHdrLen) % frameHdrLen
	for q := from; q < r.nz; q += frameHdrLen {
		if q != from && !r.isCommitHeader(q-frameHdrLen) {
			continue
		}
		if r.verifies(q) {
			return q
		}
	}
	return -1
}

func (r *segReader) isCommitHeader(pos int64) bool {
	h := r.data[pos : pos+frameHdrLen]
	return h[0] == frameCommit && h[1]|h[2]|h[3] == 0
}

// verifies reports whether a whole write that verifies starts at q.
func (r *segReader) verifies(q int64) bool {
	if typ, _, _, ok := r.frame(q); !ok || typ != frameEntry {
		return false
	}
	for pos := q; ; {
		typ, n, size, ok := r.frame(pos)
		if !ok {
			return false
		}
		if typ == frameCommit {
			return crc32.Checksum(r.data[q:pos], castagnoli) == n
		}
		pos += size
	}
}

// zeroChunk is compared with whole chunks of a segment's preallocated
// tail: bytes.Equal runs in assembly, where a loop over the bytes of a
// 64 MiB segment would take seconds under the race detector.
var zeroChunk = make([]byte, 64<<10)

// lastNonZero returns the end of the last byte of data that is not zero.
func lastNonZero(data []byte) int64 {
	n := len(data)
	for n >= len(zeroChunk) && bytes.Equal(data[n-len(zeroChunk):n], zeroChunk) {
		n -= len(zeroChunk)
	}
	return int64(len(bytes.TrimRight(data[:n], "\x00")))
}

func allZero(b []byte) bool {
	return len(bytes.TrimLeft(b, "\x00")) == 0
}
