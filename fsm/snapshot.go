package fsm

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/leasehold/leasehold"
)

// Snapshot layout (version 5): magic, version, counters, then leases by id,
// lock-delays by resource, waiters by arrival, the key-value space by key,
// the audit log and dedup records by arrival. Everything is written in a
// fixed order, so equal states give equal bytes. A node refuses a version it
// does not know, rather than guess.
//
// Version 5 scopes request IDs to their caller (request.go): a lease keeps
// its acquire's key, a waiter its key and fingerprint, a dedup record its
// key and fingerprint. Versions 3 and 4 are read as legacy state: bare
// request IDs as keys, no fingerprints.

const (
	snapMagic   = "LHSNAP"
	snapVersion = 5
	// snapOldest is the oldest snapshot version Restore reads.
	snapOldest = 3
)

// Snapshot encodes the whole state.
func (s *State) Snapshot() []byte {
	e := encoder{b: make([]byte, 0, 64+len(s.leases)*128)}
	e.b = append(e.b, snapMagic...)
	e.byte1(snapVersion)
	e.uvarint(s.lastIndex)
	e.uvarint(s.lastToken)
	e.uvarint(s.nextArrival)

	ids := make([]uint64, 0, len(s.leases))
	for id := range s.leases {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	e.uvarint(uint64(len(ids)))
	for _, id := range ids {
		l := s.leases[id]
		encodeLease(&e, &l.Lease)
		e.hash(l.secretHash)
		e.varint(int64(l.heldFor))
		e.str(l.key)
		e.str(l.attempt)
		e.str(l.renewKey)
		e.varint(int64(l.renewRemaining))
	}

	res := make([]string, 0, len(s.blocks))
	for r := range s.blocks {
		res = append(res, r)
	}
	sort.Strings(res)
	e.uvarint(uint64(len(res)))
	for _, r := range res {
		e.str(r)
		e.uvarint(s.blocks[r].token)
		e.varint(int64(s.blocks[r].delay))
	}

	ws := make([]*waiter, 0, len(s.waiters))
	for _, w := range s.waiters {
		ws = append(ws, w)
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].arrival < ws[j].arrival })
	e.uvarint(uint64(len(ws)))
	for _, w := range ws {
		w.Acquire.encode(&e)
		e.uvarint(w.arrival)
		e.varint(w.queuedAt)
		e.str(w.key)
		e.b = append(e.b, w.sum[:]...)
	}

	keys := make([]string, 0, len(s.kv))
	for k := range s.kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	e.uvarint(uint64(len(keys)))
	for _, k := range keys {
		e.str(k)
		e.str(string(s.kv[k].Value))
		e.uvarint(s.kv[k].Version)
	}

	e.uvarint(uint64(len(s.audit)))
	for i := range s.audit {
		encodeAudit(&e, &s.audit[i])
	}

	e.uvarint(uint64(s.dedup.len()))
	s.dedup.each(func(rec *dedupRec) {
		e.str(rec.key)
		e.byte1(byte(rec.kind))
		e.varint(rec.time)
		e.b = append(e.b, rec.sum[:]...)
		encodeResult(&e, rec.answer())
	})
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
	s.lastIndex = d.uvarint()
	s.lastToken = d.uvarint()
	s.nextArrival = d.uvarint()

	for range d.count(8) {
		l := &lease{}
		decodeLease(&d, &l.Lease)
		l.secretHash = d.hash()
		l.heldFor = time.Duration(d.varint())
		l.key = d.str()
		l.attempt = d.str()
		if v < 4 && d.bool() {
			l.attempt = "" // claimed by a retry (version 3): no Cancel matches
		}
		if v >= 4 {
			l.renewKey = d.str()
			l.renewRemaining = time.Duration(d.varint())
		}
		if d.err != nil {
			break
		}
		// Refuse a state Apply could never have made: it would break
		// mutual exclusion or token monotonicity on this replica only.
		if l.ID == 0 || l.Token != l.ID || l.Token > s.lastToken || s.leases[l.ID] != nil || len(l.Resources) == 0 {
			return nil, errCorrupt
		}
		s.leases[l.ID] = l
		s.owned[l.Owner]++
		for _, r := range l.Resources {
			if _, held := s.holders[r]; held {
				return nil, errCorrupt
			}
			s.holders[r] = l.ID
		}
	}
	for range d.count(3) {
		r := d.str()
		b := block{token: d.uvarint(), delay: time.Duration(d.varint())}
		if _, dup := s.blocks[r]; dup || b.token > s.lastToken {
			return nil, errCorrupt
		}
		s.blocks[r] = b
	}
	lastArrival := uint64(0)
	for range d.count(8) {
		w := &waiter{}
		w.Acquire.decode(&d)
		w.arrival = d.uvarint()
		w.queuedAt = d.varint()
		if v < 4 && d.bool() {
			w.Attempt = "" // claimed by a retry (version 3): no Cancel matches
		}
		if v >= 5 {
			w.key, w.sum = d.str(), d.fingerprint()
		} else {
			w.key = w.RequestID // legacy: unscoped, no fingerprint
		}
		if d.err != nil {
			break
		}
		if w.key == "" || w.RequestID == "" || s.waiters[w.key] != nil || w.arrival <= lastArrival ||
			w.arrival > s.nextArrival || len(w.Resources) == 0 {
			return nil, errCorrupt
		}
		lastArrival = w.arrival
		s.waiters[w.key] = w
		for _, r := range w.Resources {
			s.queues[r] = append(s.queues[r], w)
		}
	}
	for range d.count(3) {
		k := d.str()
		it := Item{Value: []byte(d.str()), Version: d.uvarint()}
		if _, dup := s.kv[k]; dup || it.Version == 0 || it.Version > s.lastIndex {
			return nil, errCorrupt
		}
		s.kv[k] = it
		s.kvBytes += len(k) + len(it.Value)
	}
	for range d.count(10) {
		s.audit = append(s.audit, decodeAudit(&d))
	}
	for range d.count(4) {
		key := d.str()
		k := Kind(d.byte1())
		t := d.varint()
		var sum fingerprint
		if v >= 5 {
			sum = d.fingerprint()
		}
		r := decodeResult(&d)
		if d.err != nil {
			break
		}
		s.dedup.put(key, k, sum, t, r, Config{DedupMax: int(^uint(0) >> 1)})
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, errCorrupt
	}
	return s, nil
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
	e.uvarint(r.Version)
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
	r.Version = d.uvarint()
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

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
