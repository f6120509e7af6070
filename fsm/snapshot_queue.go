package fsm

import "time"

// The queues section (version 8): queues by name; in each, its keys by
// name with their messages in send order, the ready heap as it is laid
// out (so a restored replica pops in the same order and writes the same
// bytes), the dead letters and the dedup ids in arrival order. Counts of
// depth and bytes are recomputed.
func writeQueues(s *State, e *encoder) {
	writeSortedCow(e, &s.queues.byName, func(name string, q *queue) {
		e.str(name)
		encodeQueueSettings(e, &q.QueueSettings)
		e.varint(q.createdAt)
		e.uvarint(q.nextSeq)
		writeSorted(e, q.keys, func(k string, qk *qkey) {
			e.str(k)
			e.bool(qk.blocked)
			e.uvarint(uint64(len(qk.msgs)))
			for _, m := range qk.msgs {
				e.uvarint(m.seq)
				e.str(string(m.body))
				e.varint(m.sentAt)
				e.varint(m.notReady)
				e.uvarint(uint64(m.receives))
				e.str(m.note)
				e.uvarint(m.token)
				e.str(m.consumer)
				e.varint(int64(m.vis))
				e.spill()
			}
		})
		e.uvarint(uint64(len(q.ready)))
		for _, k := range q.ready {
			e.str(k.name)
		}
		e.uvarint(uint64(len(q.dead)))
		for _, dl := range q.dead {
			e.uvarint(dl.seq)
			e.str(dl.key)
			e.str(string(dl.body))
			e.varint(dl.sentAt)
			e.uvarint(uint64(dl.receives))
			e.str(dl.note)
			e.varint(dl.diedAt)
		}
		e.uvarint(uint64(len(q.dedupLog)))
		for _, de := range q.dedupLog {
			e.str(de.id)
			e.uvarint(de.seq)
			e.varint(de.at)
		}
	})
}

func readQueues(s *State, d *decoder, v byte) error {
	if v < 8 {
		return nil // older snapshots have no queues
	}
	for range d.count(12) {
		name := d.str()
		var set QueueSettings
		decodeQueueSettings(d, &set)
		q := newQueue(set, d.varint())
		q.nextSeq = d.uvarint()
		for range d.count(3) {
			k := &qkey{name: d.str(), blocked: d.bool(), hix: -1}
			for range d.count(9) {
				m := &qmsg{seq: d.uvarint(), key: k, body: []byte(d.str()), sentAt: d.varint(), notReady: d.varint(),
					receives: uint32(d.uvarint()), note: d.str(), token: d.uvarint(), consumer: d.str(),
					vis: time.Duration(d.varint())}
				if d.err != nil {
					return nil
				}
				if m.token > s.lastToken || m.seq >= q.nextSeq || q.inflight[m.seq] != nil {
					return errCorrupt
				}
				if m.token != 0 && (len(k.msgs) > 0 || k.blocked) {
					return errCorrupt // only an unblocked key's head is ever in flight
				}
				if m.token != 0 {
					q.inflight[m.seq] = m
					q.consumers[m.consumer]++
				}
				k.msgs = append(k.msgs, m)
				q.depth++
				q.bytes += len(m.body)
			}
			q.keys[k.name] = k
		}
		for range d.count(1) {
			k := q.keys[d.str()]
			if d.err != nil {
				return nil
			}
			if k == nil || k.hix >= 0 || len(k.msgs) == 0 || k.blocked || k.msgs[0].token != 0 {
				return errCorrupt
			}
			k.hix = len(q.ready)
			q.ready = append(q.ready, k)
		}
		for range d.count(7) {
			dl := deadLetter{seq: d.uvarint(), key: d.str(), body: []byte(d.str()), sentAt: d.varint(),
				receives: uint32(d.uvarint()), note: d.str(), diedAt: d.varint()}
			q.dead = append(q.dead, dl)
			q.depth++
			q.bytes += len(dl.body)
		}
		for range d.count(3) {
			q.remember(dedupEntry{id: d.str(), seq: d.uvarint(), at: d.varint()})
		}
		if d.err != nil {
			return nil
		}
		s.queues.byName.set(name, q)
		s.queues.bytes += q.bytes
	}
	return nil
}

// receiptsVersion is the snapshot version that added the queue receipts
// section (queue_receipts.go): raising it renumbers the section.
const receiptsVersion = 12

// The queue receipts section (version 12): for each queue with receipts,
// by name, its receipts by key with their sequences in flight, ascending.
// Written after the queues, whose deliveries in flight it names.
func writeReceipts(s *State, e *encoder) {
	with := make(map[string]*queue)
	for name, q := range s.queues.byName.all() {
		if len(q.receipts) > 0 {
			with[name] = q
		}
	}
	writeSorted(e, with, func(name string, q *queue) {
		e.str(name)
		writeSorted(e, q.receipts, func(receipt string, seqs []uint64) {
			e.str(receipt)
			e.uvarint(uint64(len(seqs)))
			for _, seq := range seqs {
				e.uvarint(seq)
			}
		})
	})
}

func readReceipts(s *State, d *decoder, v byte) error {
	if v < receiptsVersion {
		return nil // older snapshots have no receipts
	}
	for range d.count(2) {
		q := s.queues.byName.at(d.str())
		if d.err != nil {
			return nil
		}
		if q == nil {
			return errCorrupt
		}
		for range d.count(2) {
			receipt := d.str()
			seqs := make([]uint64, 0, 1)
			for range d.count(1) {
				seq := d.uvarint()
				m := q.inflight[seq]
				if d.err != nil {
					return nil
				}
				if _, dup := q.receiptOf[seq]; m == nil || dup || receipt == "" || (len(seqs) > 0 && seq <= seqs[len(seqs)-1]) {
					return errCorrupt // a receipt names only deliveries in flight, each once, ascending
				}
				q.receiptOf[seq] = receipt
				seqs = append(seqs, seq)
			}
			if len(seqs) == 0 || q.receipts[receipt] != nil {
				return errCorrupt
			}
			q.receipts[receipt] = seqs
		}
	}
	return nil
}
