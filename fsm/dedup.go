package fsm

import (
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

// dedup remembers the answer to each request for a bounded window, so a
// retried request gets the first answer instead of acting twice. Records
// are keyed by the request ID scoped to its caller (see request.go) and
// keep the request's fingerprint: a retry must be the same request. They
// leave in arrival order once older than the window or past the cap, both
// decided by entry times stamped in the log, so every node evicts alike.
type dedup struct {
	recs  cowMap[string, *dedupRec] // a record never changes once made
	order []*dedupRec               // arrival order; a replaced record is appended anew, its old slot dead
	head  int
	// shared: a capture not yet released may read order's slots, so a
	// dropped record's slot is left for compact to drop.
	shared bool
}

type dedupRec struct {
	key  string // the scoped request ID (a bare one for a legacy record)
	sum  fingerprint
	time int64
	// The answer. Most are an acquire's grant or an error, kept inline in
	// leaseID, remaining and err: a Result in full is about 100 bytes,
	// which every remembered acquire would carry for the whole window.
	// Any other answer is kept whole in more. err is the error's concrete
	// type (a Result's Err is one): 8 bytes instead of an interface's 16
	// make a record 80 bytes, not 96.
	//
	// leaseID stands for the Lease of a granted acquire: a retry is
	// answered with the lease as it is now (it must still hold), so a copy
	// of it would only double what each lease costs.
	leaseID   uint64
	remaining time.Duration
	err       *leasehold.Error
	more      *Result
	kind      Kind
}

// live reports whether rec is its key's record, not one replaced.
func (d *dedup) live(rec *dedupRec) bool { return d.recs.at(rec.key) == rec }

// answer is the recorded result; a granted acquire's lease carries only
// its id.
func (rec *dedupRec) answer() Result {
	if rec.leaseID != 0 {
		return rec.answerIn(new(leasehold.Lease))
	}
	return rec.answerIn(nil)
}

// answerIn is answer with a granted acquire's lease written into l, so a
// snapshot of the window allocates none per record.
func (rec *dedupRec) answerIn(l *leasehold.Lease) Result {
	var r Result
	if rec.more != nil {
		r = *rec.more
	} else {
		r.Remaining = rec.remaining
		if rec.err != nil {
			r.Err = rec.err
		}
	}
	if rec.leaseID != 0 {
		*l = leasehold.Lease{ID: rec.leaseID}
		r.Lease = l
	}
	return r
}

// inline reports whether r fits dedupRec's inline fields.
func inline(k Kind, r Result) bool {
	_, plain := r.Err.(*leasehold.Error)
	return (r.Lease == nil || k == KindAcquire) && !r.Queued && r.Answer == nil && !r.Dup &&
		!r.ForeignSecret && (r.Err == nil || plain)
}

func newDedup() dedup { return dedup{recs: newCowMap[string, *dedupRec]()} }

// lookup finds the first answer to the request with this key, of kind k
// and fingerprint sum; id is the bare request ID, for the message. A
// record of another kind or request is an error that says nothing about
// the first request.
func (d *dedup) lookup(key, id string, k Kind, sum fingerprint) (Result, bool) {
	if key == "" {
		return Result{}, false
	}
	rec := d.recs.at(key)
	if rec == nil {
		return Result{}, false
	}
	if rec.kind != k || !rec.sum.matches(sum) {
		return Result{Err: reusedID(id)}, true
	}
	r := rec.answer()
	r.Dup = true
	return r, true
}

// matches reports whether a retry with fingerprint s is the request that
// made f; a zero (unknown) fingerprint on either side matches anything.
func (f fingerprint) matches(s fingerprint) bool {
	return f == s || f == fingerprint{} || s == fingerprint{}
}

func reusedID(id string) error {
	return leasehold.Errorf(leasehold.CodeInvalid,
		"request_id %q was already used for a different request: a retry must repeat the request exactly; "+
			"use a new request_id for a new request", id)
}

// put records (or replaces) the answer for key. A waiter's record is
// replaced when its wait ends, and then counts as new.
func (d *dedup) put(key string, k Kind, sum fingerprint, now int64, r Result, cfg Config) {
	if key == "" {
		return
	}
	rec := &dedupRec{key: key, kind: k, sum: sum, time: now}
	if k == KindAcquire && r.Lease != nil {
		rec.leaseID, r.Lease = r.Lease.ID, nil
	}
	if inline(k, r) {
		rec.err, _ = r.Err.(*leasehold.Error)
		rec.remaining = r.Remaining
	} else {
		rec.more = &r
	}
	d.recs.set(key, rec)
	d.order = append(d.order, rec)
	d.trim(cfg)
}

func (d *dedup) evict(now int64, cfg Config) {
	cutoff := now - int64(cfg.DedupWindow)
	for d.head < len(d.order) {
		rec := d.order[d.head]
		if d.live(rec) && rec.time > cutoff {
			break
		}
		d.drop(rec)
	}
	d.compact()
}

func (d *dedup) trim(cfg Config) {
	for d.recs.len() > cfg.DedupMax && d.head < len(d.order) {
		d.drop(d.order[d.head])
	}
	d.compact()
}

func (d *dedup) drop(rec *dedupRec) {
	if d.live(rec) {
		d.recs.del(rec.key)
	}
	if !d.shared {
		d.order[d.head] = nil
	}
	d.head++
}

// compact reclaims the slice prefix once it is half dead.
func (d *dedup) compact() {
	if d.head > 1024 && d.head*2 > len(d.order) {
		d.order = append([]*dedupRec(nil), d.order[d.head:]...)
		d.head = 0
	}
}

func (d *dedup) len() int { return d.recs.len() }

// each visits live records in arrival order.
func (d *dedup) each(f func(*dedupRec)) {
	for _, rec := range d.order[d.head:] {
		if d.live(rec) {
			f(rec)
		}
	}
}

// freeze is the window as it is, for a capture (capture.go): the
// records frozen, and the order as far as it goes now (Apply only
// appends to it or replaces it).
func (d *dedup) freeze() dedup {
	return dedup{recs: d.recs.freeze(), order: d.order[d.head:len(d.order):len(d.order)]}
}

// answerCodec writes and reads, in a snapshot's dedup record, what a
// kind's answer holds beyond a Result's common fields (encodeResult),
// from the snapshot version since. A kind names its codec in the table
// of commands (registry.go), so the answers its sub-state defines are
// written by that sub-state's code.
type answerCodec struct {
	since byte
	write func(e *encoder, r Result)
	read  func(d *decoder, r *Result)
}

// The snapshot section of the dedup window, in arrival order. Version 5
// added each record's fingerprint; older records match any retry.
// Version 6 added a transaction's answer after its result; version 13 a
// queue command's count and existed flag (queue_retries.go): the answer
// codecs of their kinds.
func writeDedup(s *State, e *encoder) {
	e.uvarint(uint64(s.dedup.len()))
	var lease leasehold.Lease
	s.dedup.each(func(rec *dedupRec) {
		e.str(rec.key)
		e.byte1(byte(rec.kind))
		e.varint(rec.time)
		e.b = append(e.b, rec.sum[:]...)
		r := rec.answerIn(&lease)
		encodeResult(e, r)
		if row := rowOf(rec.kind); row != nil && row.answer != nil {
			row.answer.write(e, r)
		}
		e.spill()
	})
}

func readDedup(s *State, d *decoder, v byte) error {
	for range d.count(4) {
		key := d.str()
		k := Kind(d.byte1())
		t := d.varint()
		var sum fingerprint
		if v >= 5 {
			sum = d.fingerprint()
		}
		r := decodeResult(d)
		if row := rowOf(k); row != nil && row.answer != nil && v >= row.answer.since {
			row.answer.read(d, &r)
		}
		if d.err != nil {
			return nil
		}
		// Keep every record the snapshot holds, whatever this node's cap.
		s.dedup.put(key, k, sum, t, r, Config{DedupMax: int(^uint(0) >> 1)})
	}
	return nil
}
