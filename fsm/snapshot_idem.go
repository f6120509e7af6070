package fsm

import "time"

// The idempotency section (version 7): records by key. An attempt in
// progress names its lease, which the leases section restores.
func writeIdem(s *State, e *encoder) {
	writeSortedCow(e, &s.idem.records, func(k string, r *idemRecord) {
		e.str(k)
		e.b = append(e.b, r.sum[:]...)
		e.uvarint(r.token)
		e.str(r.owner)
		e.varint(r.startedAt)
		e.varint(r.completedAt)
		e.varint(int64(r.retention))
		e.str(string(r.result))
		e.b = append(e.b, r.doneBy[:]...)
	})
}

func readIdem(s *State, d *decoder, v byte) error {
	if v < 7 {
		return nil // older snapshots have no idempotency keys
	}
	for range d.count(8) {
		k := d.str()
		r := &idemRecord{sum: d.fingerprint(), token: d.uvarint(), owner: d.str(),
			startedAt: d.varint(), completedAt: d.varint(), retention: time.Duration(d.varint())}
		if res := d.str(); r.completedAt != 0 {
			r.result = []byte(res)
		}
		r.doneBy = d.fingerprint()
		if d.err != nil {
			return nil
		}
		if r.completedAt == 0 && s.leases.byID.at(r.token) == nil {
			return errCorrupt // an attempt in progress always has its lease
		}
		s.idem.records.set(k, r)
		s.idem.perPrefix[idemPrefixOf(k)]++
		s.idem.bytes += len(r.result)
	}
	return nil
}
