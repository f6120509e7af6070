package fsm

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// Snapshot layout (version 14, snapVersion): magic, version, then one
// section per area in the order of sections below: counters, leases by
// id, lock-delays by resource, waiters by arrival, the key-value space by
// key, the audit log, dedup records by arrival, idempotency keys, queues,
// groups, semaphores and queue receipts. Everything is written in a fixed
// order, so equal states give equal bytes. A node refuses a version it
// does not know, rather than guess; it reads every version from snapOldest
// (golden_test.go restores a fixture of each version from 4 on).
//
// Version 5 scopes request IDs to their caller (request.go): a lease keeps
// its acquire's key, a waiter its key and fingerprint, a dedup record its
// key and fingerprint. Versions 3 and 4 are read as legacy state: bare
// request IDs as keys, no fingerprints.
//
// Version 6 keeps a transaction's answer (TxnResult) in its dedup record
// and the lease a key is bound to; a lease and a waiter say whether they
// are an election's, with the value.
//
// Version 7 adds the idempotency keys (snapshot_idem.go).
//
// Version 8 adds the keyed queues (snapshot_queue.go).
//
// Version 9 adds the partition groups (snapshot_groups.go).
//
// Version 10 adds the semaphores (snapshot_sem.go).
//
// Version 12 adds the queue receipts (snapshot_queue.go), after them.
// No snapshot was written as version 11 (the number was held for a branch
// that did not need it); one would read as version 10 does.
//
// Version 13 keeps the answer of a queue Create, Redrive or Purge with a
// request ID in its dedup record (queue_retries.go).
//
// Version 14 names leasehold's own leases under leasehold.ReservedPrefix
// (snapshot_names.go).
//
// Version 15 adds the barriers (snapshot_barrier.go), after the others.

const (
	snapMagic   = "LHSNAP"
	snapVersion = barriersVersion
	// snapOldest is the oldest snapshot version Restore reads.
	snapOldest = 3
)

// A snapshot section is one area's part of a snapshot, in the file of that
// area: a writer for the current version and a reader for every version
// from snapOldest. layout is the snapshot version that last changed the
// section's bytes; snapVersion is the newest of them (a test checks), so
// changing a section means raising snapVersion and teaching its reader the
// old layout.
type section struct {
	name   string
	layout byte
	write  func(s *State, e *encoder)
	// read fills s from d, written by a snapshot of version v. It returns
	// errCorrupt for a state Apply could never have made; a short or
	// malformed input leaves d.err set instead.
	read func(s *State, d *decoder, v byte) error
}

// sections are written and read in this order.
var sections = [...]section{
	{"counters", 3, writeCounters, readCounters},
	{"leases", reservedNamesVersion, writeLeases, readLeases},
	{"lock-delays", 3, writeBlocks, readBlocks},
	{"waiters", 6, writeWaiters, readWaiters},
	{"kv", 6, writeKV, readKV},
	{"audit", 3, writeAudit, readAudit},
	{"dedup", queueAnswersVersion, writeDedup, readDedup},
	{"idem", 7, writeIdem, readIdem},
	{"queues", 8, writeQueues, readQueues},
	{"groups", 9, writeGroups, readGroups},
	{"semaphores", 10, writeSems, readSems},
	{"queue-receipts", receiptsVersion, writeReceipts, readReceipts},
	{"barriers", barriersVersion, writeBarriers, readBarriers},
}

// Snapshot encodes the whole state at once, on the caller's goroutine (a
// backup, tests); raft's snapshots take a Capture and encode it apart.
func (s *State) Snapshot() []byte {
	// Size the buffer from the last snapshot, with room to grow: growing
	// a 25 MB buffer by appends copies it four times over, which the node
	// holds at once at its memory peak.
	size := max(64+s.leases.byID.len()*128, int(s.snaps.size.Load())*9/8)
	e := encoder{b: make([]byte, 0, size)}
	e.b = append(e.b, snapMagic...)
	e.byte1(snapVersion)
	for _, sec := range sections {
		sec.write(s, &e)
	}
	s.snaps.size.Store(int64(len(e.b)))
	return e.b
}

// Restore rebuilds a state from a snapshot.
func Restore(data []byte, cfg Config, obs Observer) (*State, error) {
	if len(data) < len(snapMagic)+1 || string(data[:len(snapMagic)]) != snapMagic {
		return nil, errors.New("fsm: not a leasehold snapshot")
	}
	v := data[len(snapMagic)]
	if v < snapOldest || v > snapVersion {
		return nil, fmt.Errorf("fsm: snapshot version %d is not supported by this node (%d to %d)", v, snapOldest, snapVersion)
	}
	d := decoder{b: data[len(snapMagic)+1:], legacy: v < 5}
	s := New(cfg, obs)
	for _, sec := range sections {
		if err := sec.read(s, &d, v); err != nil {
			return nil, err
		}
		if d.err != nil {
			return nil, d.err
		}
	}
	if len(d.b) != 0 {
		return nil, errCorrupt
	}
	return s, nil
}

// The counters come first: the other sections are checked against them.
func writeCounters(s *State, e *encoder) {
	e.uvarint(s.lastIndex)
	e.uvarint(s.lastToken)
	e.uvarint(s.leases.nextArrival)
}

func readCounters(s *State, d *decoder, _ byte) error {
	s.lastIndex = d.uvarint()
	s.lastToken = d.uvarint()
	s.leases.nextArrival = d.uvarint()
	return nil
}

func encodeLease(e *encoder, l *leasehold.Lease) {
	e.uvarint(l.ID)
	e.uvarint(l.Token)
	e.strs(l.Resources)
	e.str(l.Owner)
	e.str(l.Operation)
	e.varint(int64(l.TTL))
	e.varint(int64(l.LockDelay))
	e.varint(int64(l.MaxHold))
	e.strMap(l.Metadata)
	e.varint(timeNanos(l.AcquiredAt))
	e.varint(timeNanos(l.RenewedAt))
	e.uvarint(l.RenewCount)
	e.str(l.Progress)
	e.varint(timeNanos(l.ProgressAt))
}

func decodeLease(d *decoder, l *leasehold.Lease) {
	l.ID = d.uvarint()
	l.Token = d.uvarint()
	l.Resources = d.strs()
	legacyNames(l.Resources)
	l.Owner = d.str()
	l.Operation = d.str()
	l.TTL = time.Duration(d.varint())
	l.LockDelay = time.Duration(d.varint())
	l.MaxHold = time.Duration(d.varint())
	l.Metadata = d.strMap()
	l.AcquiredAt = nanosTime(d.varint())
	l.RenewedAt = nanosTime(d.varint())
	l.RenewCount = d.uvarint()
	l.Progress = d.str()
	l.ProgressAt = nanosTime(d.varint())
}

func encodeResult(e *encoder, r Result) {
	code, msg := leasehold.CodeOf(r.Err), ""
	if r.Err != nil {
		msg = r.Err.Error()
	}
	e.byte1(byte(code))
	e.str(msg)
	e.bool(r.Err != nil)
	e.bool(r.Lease != nil)
	if r.Lease != nil {
		encodeLease(e, r.Lease)
	}
	e.bool(r.Queued)
	e.varint(int64(r.Remaining))
	e.uvarint(r.Version())
}

func decodeResult(d *decoder) Result {
	var r Result
	code := leasehold.Code(d.byte1())
	msg := d.str()
	if d.bool() {
		r.Err = &leasehold.Error{Code: code, Message: msg}
	}
	if d.bool() {
		r.Lease = &leasehold.Lease{}
		decodeLease(d, r.Lease)
	}
	r.Queued = d.bool()
	r.Remaining = time.Duration(d.varint())
	if version := d.uvarint(); version != 0 {
		r.Answer = &KVResult{Version: version}
	}
	return r
}

func timeNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func nanosTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// writeSorted writes a map's size, then each entry in key order.
func writeSorted[V any](e *encoder, m map[string]V, write func(k string, v V)) {
	keys := sortedKeys(m)
	e.uvarint(uint64(len(keys)))
	for _, k := range keys {
		write(k, m[k])
		e.spill()
	}
}

// sortedKeys lists a map's keys in order, so it is written alike on
// every node.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
