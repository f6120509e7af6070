package cluster

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"

	"github.com/leasehold/leasehold/fsm"
)

// raft-wal checks only the last write of the log when it opens it: a
// damaged byte anywhere else is read back as if it were data (raft then
// panics applying it, or a damaged frame header ends the log early and
// the entries after it vanish). So before raft starts, every segment is
// read in full: file header, frame headers, every commit's checksum, the
// sealed segments' index blocks, index continuity between segments, and
// that every entry decodes. The format is raft-wal v0.4's
// (segment/format.go): a 32-byte file header, then frames of an 8-byte
// header (type, 3 zero bytes, length or checksum) and a payload padded to
// 8 bytes. A commit frame ends each write and holds the CRC-32C of every
// byte written since the previous commit (the first includes the file
// header).

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

// DamageError says where a data dir is damaged and how much of its log is
// good. The node refuses to start with it.
type DamageError struct {
	File     string // the damaged file
	Offset   int64  // byte offset of the damage in File
	Reason   string
	LastGood uint64 // the log is intact from its start up to this index (0: none)
	Snapshot bool   // File is a snapshot, not the log
	DataDir  string // the node's data dir
}

// What says what is damaged, without the advice.
func (e *DamageError) What() string {
	if e.Snapshot {
		return fmt.Sprintf("snapshot %s is damaged: %s", e.File, e.Reason)
	}
	return fmt.Sprintf("the log is damaged in %s at byte %d: %s; the log is intact up to index %d",
		e.File, e.Offset, e.Reason, e.LastGood)
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("cluster: %s. Refusing to start: in a cluster, wipe this node's data dir and let it rejoin; "+
		"on a single node, `leasehold recover --data-dir %s` keeps what is intact: see README, \"Failure semantics\"",
		e.What(), e.DataDir)
}

// verifyDataDir checks the snapshots and the log of a data dir. meta is
// the log's metadata store (opened here if it is not yet).
func verifyDataDir(dir string, meta *metadb.BoltMetaDB) error {
	err := verifySnapshots(dir)
	if err == nil {
		_, err = verifyLog(filepath.Join(dir, "wal"), meta)
	}
	if de, ok := err.(*DamageError); ok {
		de.DataDir = dir
	}
	return err
}

// segCheck is what reading one segment found.
type segCheck struct {
	info     types.SegmentInfo
	path     string
	size     int64
	data     []byte  // the file, while it is checked
	entries  []int64 // offsets of the frames of committed entries, from BaseIndex
	goodEnd  int64   // end of the last good commit frame (0: none)
	writes   []write // the good writes, in order
	damage   *DamageError
	lastGood uint64 // last index of a good, contiguous entry (0: none in this segment)
}

// write is one committed write: the entries up to it and where it ends.
type write struct {
	entries int
	end     int64
}

// cutAt keeps only the writes wholly before entry k (counted from
// BaseIndex).
func (sc *segCheck) cutAt(k int) {
	i := sort.Search(len(sc.writes), func(i int) bool { return sc.writes[i].entries > k })
	sc.writes = sc.writes[:i]
	sc.entries, sc.goodEnd = sc.entries[:0], 0
	if i > 0 {
		sc.entries, sc.goodEnd = sc.entries[:sc.writes[i-1].entries], sc.writes[i-1].end
	}
}

// logCheck is the whole log's verdict.
type logCheck struct {
	segs     []segCheck
	state    types.PersistentState
	lastGood uint64 // the log is intact up to here
	first    uint64 // its first index (0: empty)
	damage   *DamageError
}

// verifyLog reads every segment of the log in walDir.
func verifyLog(walDir string, meta *metadb.BoltMetaDB) (*logCheck, error) {
	st, err := meta.Load(walDir)
	if err != nil {
		return nil, &DamageError{File: filepath.Join(walDir, metadb.FileName), Reason: err.Error()}
	}
	lc := &logCheck{state: st}
	codec := &raftwal.BinaryCodec{}
	next := uint64(0) // the index the next segment must start at
	for i, si := range st.Segments {
		sealed := !si.SealTime.IsZero()
		sc := checkSegment(walDir, si, sealed)
		lo := max(si.MinIndex, si.BaseIndex)
		if lc.first == 0 && len(sc.entries) > 0 {
			lc.first = lo
		}
		if sc.damage == nil && i > 0 && next != 0 && si.BaseIndex != next && (sealed || len(sc.entries) > 0) {
			sc.damage = &DamageError{File: sc.path, Reason: fmt.Sprintf(
				"the segment starts at index %d, but the one before ends at %d: entries are missing", si.BaseIndex, next-1)}
			sc.entries = nil
		}
		if sc.damage == nil && sealed && si.MaxIndex > 0 && si.BaseIndex+uint64(len(sc.entries)) <= si.MaxIndex {
			sc.damage = &DamageError{File: sc.path, Offset: sc.goodEnd, Reason: fmt.Sprintf(
				"the segment should hold entries up to index %d but ends at %d", si.MaxIndex, si.BaseIndex+uint64(len(sc.entries))-1)}
		}
		hi := si.BaseIndex + uint64(len(sc.entries)) - 1
		if sealed && si.MaxIndex > 0 && si.MaxIndex < hi {
			hi = si.MaxIndex // a tail truncation dropped the rest
		}
		// Every entry must decode, as raft and the state machine read it.
		for ix := lo; ix <= hi && len(sc.entries) > 0; ix++ {
			off := sc.entries[ix-si.BaseIndex]
			n := int64(binary.LittleEndian.Uint32(sc.data[off+4:]))
			var l raft.Log
			derr := codec.Decode(sc.data[off+frameHdrLen:off+frameHdrLen+n], &l)
			if derr == nil && l.Index != ix {
				derr = fmt.Errorf("it says it is entry %d", l.Index)
			}
			if derr == nil && l.Type == raft.LogCommand {
				_, derr = fsm.DecodeBatch(l.Data)
			}
			if derr != nil {
				sc.damage = &DamageError{File: sc.path, Offset: off, Reason: fmt.Sprintf("entry %d cannot be read: %v", ix, derr)}
				sc.cutAt(int(ix - si.BaseIndex))
				hi = si.BaseIndex + uint64(len(sc.entries)) - 1
				break
			}
		}
		sc.data = nil
		if len(sc.entries) > 0 && hi >= lo {
			sc.lastGood = hi
		}
		if sc.damage != nil {
			sc.damage.LastGood = lc.lastGood
			if sc.lastGood > 0 {
				sc.damage.LastGood = sc.lastGood
			}
			lc.segs = append(lc.segs, sc)
			lc.damage = sc.damage
			lc.lastGood = sc.damage.LastGood
			return lc, sc.damage
		}
		if sc.lastGood > 0 {
			lc.lastGood = sc.lastGood
			next = sc.lastGood + 1
		}
		lc.segs = append(lc.segs, sc)
	}
	return lc, nil
}

// checkSegment reads one segment file and verifies its frames.
func checkSegment(walDir string, si types.SegmentInfo, sealed bool) segCheck {
	sc := segCheck{info: si, path: filepath.Join(walDir, segment.FileName(si))}
	data, err := os.ReadFile(sc.path)
	if errors.Is(err, os.ErrNotExist) && !sealed {
		return sc // raft-wal creates a missing tail (a crash before its first write)
	}
	if err != nil {
		sc.damage = &DamageError{File: sc.path, Reason: fmt.Sprintf("cannot read it: %v", err)}
		return sc
	}
	sc.size = int64(len(data))
	sc.data = data
	bad := func(off int64, format string, args ...any) segCheck {
		sc.damage = &DamageError{File: sc.path, Offset: off, Reason: fmt.Sprintf(format, args...)}
		return sc
	}
	// raft-wal preallocates every segment to its size limit before it
	// writes to it, so a shorter file that holds a write lost its end. (A
	// crash between creating the tail and preallocating it leaves a short
	// file with nothing in it, which raft-wal starts over.)
	if si.SizeLimit > 0 && sc.size < int64(si.SizeLimit) {
		sc = walkFrames(sc, data)
		if sealed || sc.goodEnd > 0 {
			return bad(sc.size, "the file is %d bytes, shorter than the %d it was created with: its end was cut off", sc.size, si.SizeLimit)
		}
		sc.damage, sc.entries = nil, nil
		return sc
	}
	if len(data) < segHeaderLen {
		return bad(0, "the file is too short for a segment header")
	}
	if binary.LittleEndian.Uint32(data[0:4]) != segMagic || data[7] != 0 ||
		binary.LittleEndian.Uint64(data[8:16]) != si.BaseIndex ||
		binary.LittleEndian.Uint64(data[16:24]) != si.ID ||
		binary.LittleEndian.Uint64(data[24:32]) != si.Codec {
		if !sealed && allZero(data[segHeaderLen:]) {
			return sc // nothing was ever committed here
		}
		return bad(0, "the segment header does not match the log's metadata")
	}
	sc = walkFrames(sc, data)
	if sc.damage == nil {
		return sc
	}
	if sealed {
		return sc
	}
	// In the last segment a bad last write is what a crash in the middle
	// of it leaves (raft-wal drops it; it was never acknowledged), unless
	// good writes follow it: then it is damage.
	if !validBatchAfter(data, sc.goodEnd) {
		sc.damage = nil
	}
	return sc
}

// walkFrames follows the frames of a segment from its header, verifying
// every commit's checksum, and records the committed entries. It stops at
// the first zero header (the end of what was written) or the first damage.
func walkFrames(sc segCheck, data []byte) segCheck {
	pos, crcStart := int64(segHeaderLen), int64(0)
	var pending []int64 // entries of the write in progress
	indexAt := int64(-1)
	sealed := !sc.info.SealTime.IsZero()
	for pos+frameHdrLen <= int64(len(data)) {
		h := data[pos : pos+frameHdrLen]
		if allZero(h) {
			break
		}
		if h[1] != 0 || h[2] != 0 || h[3] != 0 {
			sc.damage = &DamageError{File: sc.path, Offset: crcStart, Reason: fmt.Sprintf(
				"the frame header at byte %d, in the write that starts at byte %d, is damaged", pos, crcStart)}
			return sc
		}
		n := int64(binary.LittleEndian.Uint32(h[4:]))
		switch h[0] {
		case frameEntry, frameIndex:
			size := frameHdrLen + n + (frameHdrLen-n%frameHdrLen)%frameHdrLen
			if n > segMaxFrameLen || pos+size > int64(len(data)) {
				sc.damage = &DamageError{File: sc.path, Offset: crcStart, Reason: fmt.Sprintf(
					"the frame header at byte %d, in the write that starts at byte %d, gives a length (%d) that runs past the file", pos, crcStart, n)}
				return sc
			}
			if h[0] == frameEntry {
				pending = append(pending, pos)
			} else {
				indexAt = pos
			}
			pos += size
		case frameCommit:
			if got := crc32.Checksum(data[crcStart:pos], castagnoli); got != uint32(n) {
				sc.damage = &DamageError{File: sc.path, Offset: crcStart, Reason: fmt.Sprintf(
					"the write from byte %d to %d fails its checksum (stored %08x, computed %08x)", crcStart, pos, uint32(n), got)}
				return sc
			}
			sc.entries = append(sc.entries, pending...)
			pending = pending[:0]
			pos += frameHdrLen
			crcStart, sc.goodEnd = pos, pos
			sc.writes = append(sc.writes, write{len(sc.entries), pos})
			if indexAt >= 0 {
				if !sealed || sc.info.IndexStart != uint64(indexAt+frameHdrLen) || !indexMatches(data[indexAt:], sc.entries) {
					sc.damage = &DamageError{File: sc.path, Offset: indexAt, Reason: "the segment's index block does not match its entries"}
				}
				return sc // a sealed segment ends with its index
			}
		default:
			sc.damage = &DamageError{File: sc.path, Offset: crcStart, Reason: fmt.Sprintf(
				"the frame header at byte %d, in the write that starts at byte %d, has an unknown type %d", pos, crcStart, h[0])}
			return sc
		}
	}
	if sealed {
		sc.damage = &DamageError{File: sc.path, Offset: pos, Reason: "the sealed segment has no index block"}
	} else if len(pending) > 0 {
		// entries without a commit: a write the crash cut short
		sc.damage = &DamageError{File: sc.path, Offset: crcStart, Reason: "a write has no commit frame"}
	}
	return sc
}

func indexMatches(frame []byte, entries []int64) bool {
	n := int(binary.LittleEndian.Uint32(frame[4:]))
	if n != 4*len(entries) {
		return false
	}
	for i, off := range entries {
		if int64(binary.LittleEndian.Uint32(frame[frameHdrLen+4*i:])) != off {
			return false
		}
	}
	return true
}

// validBatchAfter reports whether a complete, checksummed write lies
// somewhere after from: two commit frames at 8-byte boundaries with the
// checksum of the bytes between them. It tells damage followed by good
// data from a crash's torn last write, which nothing good follows.
func validBatchAfter(data []byte, from int64) bool {
	prev := int64(-1)
	for p := from - from%frameHdrLen; p+frameHdrLen <= int64(len(data)); p += frameHdrLen {
		h := data[p : p+frameHdrLen]
		if h[0] != frameCommit || h[1] != 0 || h[2] != 0 || h[3] != 0 {
			continue
		}
		if prev >= 0 && crc32.Checksum(data[prev+frameHdrLen:p], castagnoli) == binary.LittleEndian.Uint32(h[4:]) {
			return true
		}
		prev = p
	}
	return false
}

func allZero(b []byte) bool {
	return len(bytes.TrimLeft(b, "\x00")) == 0
}

// verifySnapshots checks each snapshot's state against the checksum in
// its metadata, as raft does when it opens one, but before raft starts:
// raft logs the two checksums as raw bytes and falls back to an older
// snapshot, whose log entries may be gone.
func verifySnapshots(dir string) error {
	root := filepath.Join(dir, "snapshots")
	ents, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cluster: list snapshots: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() || filepath.Ext(e.Name()) == ".tmp" {
			continue
		}
		if err := verifySnapshot(filepath.Join(root, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func verifySnapshot(snapDir string) error {
	metaPath := filepath.Join(snapDir, "meta.json")
	statePath := filepath.Join(snapDir, "state.bin")
	b, err := os.ReadFile(metaPath)
	if err != nil {
		return &DamageError{Snapshot: true, File: metaPath, Reason: fmt.Sprintf("cannot read it: %v", err)}
	}
	var meta struct{ CRC []byte }
	if err := json.Unmarshal(b, &meta); err != nil {
		return &DamageError{Snapshot: true, File: metaPath, Reason: fmt.Sprintf("its metadata is not valid JSON: %v", err)}
	}
	f, err := os.Open(statePath)
	if err != nil {
		return &DamageError{Snapshot: true, File: statePath, Reason: fmt.Sprintf("cannot read it: %v", err)}
	}
	defer f.Close()
	h := crc64.New(crc64.MakeTable(crc64.ECMA))
	if _, err := io.Copy(h, f); err != nil {
		return &DamageError{Snapshot: true, File: statePath, Reason: fmt.Sprintf("cannot read it: %v", err)}
	}
	if got := h.Sum(nil); !bytes.Equal(got, meta.CRC) {
		return &DamageError{Snapshot: true, File: statePath, Reason: fmt.Sprintf(
			"its checksum is %x, but %s records %x", got, filepath.Base(metaPath), meta.CRC)}
	}
	return nil
}
