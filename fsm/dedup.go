package fsm

import "github.com/leasehold/leasehold"

// dedup remembers the answer to each request ID for a bounded window, so a
// retried request gets the first answer instead of acting twice. Records
// leave in arrival order once older than the window or past the cap, both
// decided by entry times stamped in the log, so every node evicts alike.
type dedup struct {
	recs  map[string]*dedupRec
	order []*dedupRec // arrival order; a replaced record is appended anew, its old slot dead
	head  int
}

type dedupRec struct {
	id     string
	kind   Kind
	time   int64
	result Result
	// leaseID stands for result.Lease of a granted acquire: a retry is
	// answered with the lease as it is now (it must still hold), so a copy
	// of it would only double what each lease costs.
	leaseID uint64
	live    bool
}

// answer is the recorded result; a granted acquire's lease carries only
// its id.
func (rec *dedupRec) answer() Result {
	r := rec.result
	if rec.leaseID != 0 {
		r.Lease = &leasehold.Lease{ID: rec.leaseID}
	}
	return r
}

func newDedup() dedup { return dedup{recs: make(map[string]*dedupRec)} }

func (d *dedup) lookup(id string, k Kind) (Result, bool) {
	if id == "" {
		return Result{}, false
	}
	rec := d.recs[id]
	if rec == nil {
		return Result{}, false
	}
	if rec.kind != k {
		return Result{Err: leasehold.Errorf(leasehold.CodeInvalid,
			"request_id %q was already used for a different kind of request", id)}, true
	}
	r := rec.answer()
	r.Dup = true
	return r, true
}

// put records (or replaces) the answer for id. A waiter's record is
// replaced when its wait ends, and then counts as new.
func (d *dedup) put(id string, k Kind, now int64, r Result, cfg Config) {
	if id == "" {
		return
	}
	if old := d.recs[id]; old != nil {
		old.live = false
	}
	rec := &dedupRec{id: id, kind: k, time: now, result: r, live: true}
	if k == KindAcquire && r.Lease != nil {
		rec.leaseID, rec.result.Lease = r.Lease.ID, nil
	}
	d.recs[id] = rec
	d.order = append(d.order, rec)
	d.trim(cfg)
}

func (d *dedup) evict(now int64, cfg Config) {
	cutoff := now - int64(cfg.DedupWindow)
	for d.head < len(d.order) {
		rec := d.order[d.head]
		if rec.live && rec.time > cutoff {
			break
		}
		d.drop(rec)
	}
	d.compact()
}

func (d *dedup) trim(cfg Config) {
	for len(d.recs) > cfg.DedupMax && d.head < len(d.order) {
		d.drop(d.order[d.head])
	}
	d.compact()
}

func (d *dedup) drop(rec *dedupRec) {
	if rec.live {
		delete(d.recs, rec.id)
	}
	d.order[d.head] = nil
	d.head++
}

// compact reclaims the slice prefix once it is half dead.
func (d *dedup) compact() {
	if d.head > 1024 && d.head*2 > len(d.order) {
		d.order = append([]*dedupRec(nil), d.order[d.head:]...)
		d.head = 0
	}
}

func (d *dedup) len() int { return len(d.recs) }

// each visits live records in arrival order.
func (d *dedup) each(f func(*dedupRec)) {
	for _, rec := range d.order[d.head:] {
		if rec.live {
			f(rec)
		}
	}
}
